package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/codec"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
)

func TestHumanPayload(t *testing.T) {
	long := strings.Repeat("é", peekPayloadBytes) // two bytes a rune: the cut must respect runes
	for _, test := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"empty", nil, ""},
		{"json", []byte(`{"seq":1, "ok":true}`), `{"seq":1, "ok":true}`},
		{"unicode", []byte("température 20°C"), "température 20°C"},
		{"newline is quoted", []byte("a\nb"), `"a\nb"`},
		{"tab is quoted", []byte("a\tb"), `"a\tb"`},
		{"control byte", []byte{'a', 0x01}, "base64:" + base64.StdEncoding.EncodeToString([]byte{'a', 0x01})},
		{"invalid utf-8", []byte{0xff, 0xfe}, "base64://4="},
		{"zero bytes", make([]byte, 3), "base64:AAAA"},
		{"looks like base64", []byte("base64:AAAA"), `"base64:AAAA"`},
		{"starts with a quote", []byte(`"hi"`), `"\"hi\""`},
		{"long text is cut", []byte(long), strings.Repeat("é", peekPayloadBytes/2) +
			fmt.Sprintf("... (%d more bytes; ironbus dump prints them all)", len(long)-peekPayloadBytes)},
	} {
		if got := humanPayload(test.payload); got != test.want {
			t.Errorf("%s: humanPayload(%q) = %q, want %q", test.name, test.payload, got, test.want)
		}
	}
}

func TestHumanField(t *testing.T) {
	for input, want := range map[string]string{
		"sensor-1":   "sensor-1",
		"two words":  `"two words"`,
		"a=b":        `"a=b"`,
		"":           "",
		"\x00binary": "base64:" + base64.StdEncoding.EncodeToString([]byte("\x00binary")),
	} {
		if got := humanField([]byte(input)); got != want {
			t.Errorf("humanField(%q) = %q, want %q", input, got, want)
		}
	}
}

func TestEncodeBytes(t *testing.T) {
	if value, encoding := encodeBytes([]byte("line\none")); value != "line\none" || encoding != encodingText {
		t.Errorf("text: %q %q", value, encoding)
	}
	if value, encoding := encodeBytes([]byte{0xc3}); value != "ww==" || encoding != encodingBase64 {
		t.Errorf("binary: %q %q", value, encoding)
	}
}

func encodedBody(t *testing.T, body record.Body) []byte {
	t.Helper()
	encoded, err := record.AppendBody(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	return encoded
}

func TestEntryOutput(t *testing.T) {
	body := encodedBody(t, record.Body{Codec: record.CodecZstd, Key: []byte("k"), Subject: []byte("s.t"),
		Headers: []record.Header{{Name: "h", Value: []byte{0}}, {Name: "h", Value: []byte("v")}},
		Payload: []byte("looks like text"), RawLength: 100, HasProducer: true, ProducerID: 7, Sequence: 9})
	d := newReadDecompressor()
	record := entryOutput(segment.Entry{Offset: 5, Timestamp: 1_500_000_000, BodyCRC: 42, Body: body}, d).(recordOutput)
	switch {
	case record.Timestamp != "1970-01-01T00:00:01.5Z" || record.TimestampNanos != 1_500_000_000:
		t.Errorf("timestamp %q %d", record.Timestamp, record.TimestampNanos)
	case record.PayloadEncoding != encodingBase64 || record.Codec != "zstd" || record.RawLength != 100 || record.DecompressError == "":
		t.Errorf("a payload that does not decompress must be base64 with its error: %+v", record)
	case len(record.Headers) != 2 || record.Headers[0].ValueEncoding != encodingBase64 || record.Headers[1].Value != "v":
		t.Errorf("headers %+v", record.Headers)
	case record.ProducerID == nil || *record.ProducerID != 7 || *record.Sequence != 9:
		t.Errorf("producer missing: %+v", record)
	}
	broken := entryOutput(segment.Entry{Offset: 6, Body: []byte("not a body")}, d).(recordOutput)
	if broken.BodyError == "" || broken.Payload != base64.StdEncoding.EncodeToString([]byte("not a body")) {
		t.Errorf("an undecodable body must be shown raw with its error: %+v", broken)
	}
}

func TestHumanEntry(t *testing.T) {
	body := encodedBody(t, record.Body{Key: []byte("k"), Subject: []byte("s"),
		Headers: []record.Header{{Name: "unit", Value: []byte("celsius")}}, Payload: []byte("20")})
	got := humanEntry(segment.Entry{Offset: 3, Timestamp: 0, Body: body}, newReadDecompressor())
	if want := "#3 1970-01-01T00:00:00Z key=k subject=s headers={unit=celsius} 2B payload=20"; got != want {
		t.Errorf("record line %q, want %q", got, want)
	}
	gap := humanEntry(segment.Entry{Gap: &segment.Gap{From: 10, To: 12, Reason: "corrupt_record_body"}}, nil)
	if want := "gap 10..11 (corrupt_record_body)"; gap != want {
		t.Errorf("gap line %q, want %q", gap, want)
	}
}

func TestExitCodeOf(t *testing.T) {
	wrapped := fmt.Errorf("context: %w", exitErrorf(exitLocked, "held"))
	if exitCodeOf(wrapped) != exitLocked || exitCodeOf(nil) != exitClean || exitCodeOf(errors.New("flag")) != exitUsage {
		t.Error("exitCodeOf does not find the code through wrapping")
	}
	internal := classified(func() error { return errors.New("bug") })(nil, nil)
	if exitCodeOf(internal) != exitInternal {
		t.Errorf("an unclassified error maps to %d, want %d", exitCodeOf(internal), exitInternal)
	}
	if worseExitCode(exitDamage, exitClean) != exitDamage || worseExitCode(exitDamage, exitUnreadable) != exitUnreadable {
		t.Error("worseExitCode keeps the less serious code")
	}
}

func TestCompressedEntryIsShownDecompressed(t *testing.T) {
	payload := []byte(strings.Repeat(`{"sensor":"t1","value":20.5}`, 20))
	compressor, err := codec.NewCompressor(codec.Policy{Codec: record.CodecLZ4})
	if err != nil {
		t.Fatal(err)
	}
	stored, kind := compressor.Compress(payload)
	if kind != record.CodecLZ4 {
		t.Fatalf("test payload stored as %s", kind)
	}
	body := encodedBody(t, record.Body{Codec: kind, Payload: stored, RawLength: uint32(len(payload))})
	d := newReadDecompressor()
	record := entryOutput(segment.Entry{Offset: 1, Body: body}, d).(recordOutput)
	if record.Payload != string(payload) || record.PayloadEncoding != encodingText || record.Codec != "lz4" ||
		record.RawLength != uint32(len(payload)) || record.StoredLength != len(stored) || record.DecompressError != "" {
		t.Errorf("dump of an lz4 record: %+v", record)
	}
	line := humanEntry(segment.Entry{Offset: 1, Body: body}, d)
	if want := fmt.Sprintf("codec=lz4 stored=%dB %dB payload=%s", len(stored), len(payload), payload); !strings.Contains(line, want) {
		t.Errorf("peek line %q lacks %q", line, want)
	}
}
