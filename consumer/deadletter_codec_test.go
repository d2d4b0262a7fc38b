package consumer

import (
	"bytes"
	"testing"

	"github.com/ironbus/ironbus/record"
)

// TestDeadLetterKeepsTheCodec: moving a compressed record to the
// dead-letter queue (and redriving it back) keeps its payload exactly as
// the producer compressed it, codec and raw length included: the broker
// never decompresses.
func TestDeadLetterKeepsTheCodec(t *testing.T) {
	compressed := []byte{0x1f, 0x61, 0x01, 0x00, 0xff, 0x50, 0x61, 0x61, 0x61, 0x61, 0x61}
	source, err := record.AppendBody(nil, record.Body{Codec: record.CodecLZ4, Key: []byte("k"), Payload: compressed, RawLength: 300})
	if err != nil {
		t.Fatal(err)
	}
	letter, err := EncodeDeadLetter(DeadLetter{Group: "g", Stream: "s", Offset: 4, Attempts: 5, Reason: "max_attempts", Body: source})
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"dead letter": letter, "source": source} {
		view, err := record.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		if view.Codec != record.CodecLZ4 || view.RawLength != 300 || !bytes.Equal(view.Payload, compressed) {
			t.Fatalf("%s: codec %s raw %d payload %x", name, view.Codec, view.RawLength, view.Payload)
		}
	}
	redriven, err := redrivenBody(letter, 0)
	if err != nil {
		t.Fatal(err)
	}
	view, err := record.Parse(redriven)
	if err != nil || view.Codec != record.CodecLZ4 || view.RawLength != 300 || !bytes.Equal(view.Payload, compressed) {
		t.Fatalf("redriven: %v codec %s raw %d", err, view.Codec, view.RawLength)
	}
}
