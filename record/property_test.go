package record_test

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ironbus/ironbus/internal/codectest"
	"github.com/ironbus/ironbus/record"
)

// Property tests: random values from a fixed seed must survive encode and
// decode unchanged. The values lean towards the edges (zero, one, the
// maximum) where off-by-one and sign bugs live. A fixed seed keeps failures
// replayable; the fuzz targets cover the search for new inputs.

const propertyRounds = 300

func TestRoundTripFrameProperty(t *testing.T) {
	rng := codectest.NewRand(100)
	for round := range propertyRounds {
		size := rng.IntN(300)
		if round%50 == 0 {
			size = record.BodyHashThreshold + rng.IntN(300) - 150 // straddle the threshold
		}
		body := codectest.RandomBytes(rng, size)
		offset, timestamp := codectest.EdgyUint64(rng), int64(codectest.EdgyUint64(rng))
		frame := record.AppendFrame(nil, offset, timestamp, body, record.Checksum(body), record.BodyHash(body))
		header, got, err := record.ParseFrame(frame, uint32(size))
		if err != nil || header.Offset != offset || header.Timestamp != timestamp || !bytes.Equal(got, body) {
			t.Fatalf("round %d: body %d offset %d: %+v, %v", round, size, offset, header, err)
		}
		if size > 0 {
			_, _, err := record.ParseFrame(frame, uint32(size-1))
			codectest.RequireErrorIs(t, err, record.ErrTooLarge, "body one over maxBody")
		}
	}
}

// randomBody returns a body with random fields; about half have producers
// and headers, and codecs include ones this binary does not know.
func randomBody(rng *rand.Rand) record.Body {
	b := record.Body{
		Codec:   record.Codec(rng.IntN(4)),
		Key:     codectest.RandomBytes(rng, rng.IntN(20)),
		Subject: codectest.RandomBytes(rng, rng.IntN(20)),
		Payload: codectest.RandomBytes(rng, rng.IntN(100)),
	}
	if b.Codec != record.CodecNone {
		b.RawLength = codectest.EdgyUint32(rng)
	}
	if rng.IntN(2) == 0 {
		b.HasProducer, b.ProducerID, b.Sequence = true, codectest.EdgyUint64(rng), codectest.EdgyUint64(rng)
	}
	for range rng.IntN(5) {
		b.Headers = append(b.Headers, record.Header{Name: string(codectest.RandomBytes(rng, rng.IntN(10))), Value: codectest.RandomBytes(rng, rng.IntN(10))})
	}
	return b
}

func TestRoundTripBodyProperty(t *testing.T) {
	rng := codectest.NewRand(101)
	for round := range propertyRounds {
		body := randomBody(rng)
		encoded, err := record.AppendBody(nil, body)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		view, err := record.Parse(encoded)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		checkBodyView(t, encoded, view)
		if got, want := normalizeBody(bodyFromView(view)), normalizeBody(body); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: decoded %+v\nwant %+v", round, got, want)
		}
		// A body travels inside a record frame: check the two layers
		// compose.
		frame := record.AppendFrame(nil, 1, 2, encoded, record.Checksum(encoded), record.BodyHash(encoded))
		_, inner, err := record.ParseFrame(frame, record.DefaultMaxBody)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := record.Parse(inner); err != nil {
			t.Fatalf("round %d: body inside a frame: %v", round, err)
		}
	}
}

// TestRandomBytesNeverPanic throws short random buffers, and random buffers
// behind a frame magic or a body version, at every decoder. The fuzz
// targets do this at scale; this keeps a cheap version in every `go test`
// run.
func TestRandomBytesNeverPanic(t *testing.T) {
	rng := codectest.NewRand(103)
	magics := [][]byte{nil, []byte("IR"), []byte("IC"), {record.BodyVersion}}
	for range 2000 {
		input := append(append([]byte(nil), magics[rng.IntN(len(magics))]...), codectest.RandomBytes(rng, rng.IntN(120))...)
		if _, _, err := record.ParseFrame(input, rng.Uint32()); err == nil {
			t.Fatalf("random bytes parsed as a record frame: %x", input)
		}
		// Random bytes can form a valid body by chance, so only the
		// invariants are checked.
		if view, err := record.Parse(input); err == nil {
			checkBodyView(t, input, view)
		}
		record.Subject(input)
		record.IsFrame(input)
		if n, err := record.OtherFrameLength(input); err == nil && (n < 8 || n > len(input)) {
			t.Fatalf("OtherFrameLength = %d for %d bytes", n, len(input))
		}
	}
}
