package format_test

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/ironbus/ironbus/segment/format"
)

// bodyFromView copies a decoded view back into a Body, the inverse of
// AppendBody, so tests can compare and re-encode.
func bodyFromView(v format.BodyView) format.Body {
	b := format.Body{
		Codec:       v.Codec,
		Key:         v.Key,
		Subject:     v.Subject,
		Payload:     v.Payload,
		RawLength:   v.RawLength,
		HasProducer: v.HasProducer,
		ProducerID:  v.ProducerID,
		Sequence:    v.Sequence,
	}
	for name, value := range v.Headers() {
		b.Headers = append(b.Headers, format.Header{Name: string(name), Value: value})
	}
	return b
}

// normalizeBody maps the encodings AppendBody treats alike onto one value:
// nil and empty byte fields, and an unset RawLength on an uncompressed
// payload (the encoder fills in the payload length).
func normalizeBody(b format.Body) format.Body {
	orEmpty := func(s []byte) []byte {
		if s == nil {
			return []byte{}
		}
		return s
	}
	b.Key, b.Subject, b.Payload = orEmpty(b.Key), orEmpty(b.Subject), orEmpty(b.Payload)
	if b.Codec == format.CodecNone {
		b.RawLength = uint32(len(b.Payload))
	}
	if !b.HasProducer {
		b.ProducerID, b.Sequence = 0, 0
	}
	var headers []format.Header
	for _, h := range b.Headers {
		headers = append(headers, format.Header{Name: h.Name, Value: orEmpty(h.Value)})
	}
	b.Headers = headers
	return b
}

func exampleBodies() map[string]format.Body {
	return map[string]format.Body{
		"empty":        {},
		"payload only": {Payload: []byte("hello")},
		"key subject payload": {Key: []byte("user-42"), Subject: []byte("orders.created"),
			Payload: []byte(`{"id":1}`)},
		"producer":          {HasProducer: true, ProducerID: math.MaxUint64, Sequence: 1 << 40, Payload: []byte("p")},
		"producer zero ids": {HasProducer: true},
		"headers": {Headers: []format.Header{
			{Name: "content-type", Value: []byte("application/json")},
			{Name: "", Value: []byte("empty name")},
			{Name: "empty value", Value: nil},
			{Name: "binary", Value: []byte{0, 1, 2, 0xff}},
			{Name: "content-type", Value: []byte("repeated names are kept in order")},
		}, Payload: []byte("x")},
		"lz4":                {Codec: format.CodecLZ4, Payload: []byte{0x10, 'a'}, RawLength: 1},
		"zstd":               {Codec: format.CodecZstd, Payload: []byte{0x28, 0xb5, 0x2f, 0xfd}, RawLength: 1 << 20},
		"zstd raw 0":         {Codec: format.CodecZstd, Payload: []byte{1}, RawLength: 0},
		"unknown code":       {Codec: format.Codec(77), Payload: []byte("stored as sent"), RawLength: 3},
		"raw length matches": {Codec: format.CodecNone, Payload: []byte("abc"), RawLength: 3},
		"everything": {Codec: format.CodecZstd, Key: []byte("k"), Subject: []byte("s"),
			Headers: []format.Header{{Name: "h", Value: []byte("v")}}, Payload: []byte("zz"), RawLength: 99,
			HasProducer: true, ProducerID: 7, Sequence: 8},
		"limits": {Key: bytes.Repeat([]byte("k"), math.MaxUint16), Subject: bytes.Repeat([]byte("s"), math.MaxUint16),
			Headers: []format.Header{{Name: strings.Repeat("n", math.MaxUint16), Value: bytes.Repeat([]byte("v"), 1000)}},
			Payload: bytes.Repeat([]byte("p"), format.XXH3Threshold)},
	}
}

func TestRoundTripBody(t *testing.T) {
	for name, body := range exampleBodies() {
		encoded, err := format.AppendBody(nil, body)
		if err != nil {
			t.Fatalf("%s: AppendBody: %v", name, err)
		}
		if len(encoded) != format.BodySize(body) {
			t.Fatalf("%s: encoded %d bytes, BodySize says %d", name, len(encoded), format.BodySize(body))
		}
		view, err := format.DecodeBody(encoded)
		if err != nil {
			t.Fatalf("%s: DecodeBody: %v", name, err)
		}
		if view.Version != format.BodyVersion {
			t.Fatalf("%s: version %d", name, view.Version)
		}
		checkBodyView(t, encoded, view)
		if got, want := normalizeBody(bodyFromView(view)), normalizeBody(body); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: decoded %+v\nwant %+v", name, got, want)
		}
		again, err := format.AppendBody(nil, bodyFromView(view))
		if err != nil || !bytes.Equal(again, encoded) {
			t.Fatalf("%s: re-encoding the decoded body differs (%v)", name, err)
		}
	}
}

// checkBodyView checks the invariants every successfully decoded body must
// satisfy: the parts exactly tile the input, each part aliases the input
// with its capacity clipped (so appending to one field cannot overwrite the
// next), and the header list walks to its end.
func checkBodyView(t testing.TB, encoded []byte, v format.BodyView) {
	t.Helper()
	prefix := format.BodyFixedSize
	if v.HasProducer {
		prefix += format.BodyProducerSize
	}
	if total := prefix + len(v.Key) + len(v.Subject) + len(v.HeaderBytes) + len(v.Payload); total != len(encoded) {
		t.Fatalf("body parts add up to %d bytes, input has %d", total, len(encoded))
	}
	at := prefix
	for _, part := range []struct {
		name  string
		bytes []byte
	}{{"key", v.Key}, {"subject", v.Subject}, {"headers", v.HeaderBytes}, {"payload", v.Payload}} {
		if cap(part.bytes) != len(part.bytes) {
			t.Fatalf("%s: capacity %d beyond its length %d", part.name, cap(part.bytes), len(part.bytes))
		}
		if len(part.bytes) > 0 && unsafe.SliceData(part.bytes) != &encoded[at] {
			t.Fatalf("%s does not alias the input at %d", part.name, at)
		}
		at += len(part.bytes)
	}
	if v.Codec == format.CodecNone && v.RawLength != uint32(len(v.Payload)) {
		t.Fatalf("uncompressed payload of %d bytes with raw length %d", len(v.Payload), v.RawLength)
	}
	if v.Version == 0 || v.Version > format.BodyVersion {
		t.Fatalf("decoded body version %d", v.Version)
	}
	walked := 0
	for name, value := range v.Headers() {
		if name == nil && value == nil {
			t.Fatal("Headers yielded the truncation marker for a validated list")
		}
		if cap(name) != len(name) || cap(value) != len(value) {
			t.Fatal("a header name or value has capacity beyond its length")
		}
		walked += 2 + len(name) + 4 + len(value)
	}
	if walked != len(v.HeaderBytes) {
		t.Fatalf("headers walk %d bytes of a %d-byte list", walked, len(v.HeaderBytes))
	}
}

func TestRoundTripBodyAppendsToDst(t *testing.T) {
	body := format.Body{Key: []byte("k"), Payload: []byte("payload"), HasProducer: true, ProducerID: 3}
	alone, err := format.AppendBody(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	for _, capacity := range []int{0, 3, 1024} {
		prefix := []byte("prefix")
		dst := append(make([]byte, 0, len(prefix)+capacity), prefix...)
		// Garbage in the spare capacity must be overwritten, not kept.
		for i := len(dst); i < cap(dst); i++ {
			dst[:cap(dst)][i] = 0xa5
		}
		got, err := format.AppendBody(dst, body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], alone) {
			t.Fatalf("capacity %d: AppendBody to a non-empty dst differs", capacity)
		}
	}
}

func TestFormatBodyEncodeRejects(t *testing.T) {
	long := make([]byte, math.MaxUint16+1)
	tests := map[string]format.Body{
		"key too long":       {Key: long},
		"subject too long":   {Subject: long},
		"header name long":   {Headers: []format.Header{{Name: string(long)}}},
		"raw length differs": {Codec: format.CodecNone, Payload: []byte("abc"), RawLength: 4},
	}
	for name, body := range tests {
		dst := []byte("keep")
		got, err := format.AppendBody(dst, body)
		requireErrorIs(t, err, format.ErrMalformedBody, name)
		if !bytes.Equal(got, []byte("keep")) {
			t.Errorf("%s: AppendBody changed dst on error: %q", name, got)
		}
	}
}

func TestFormatBodyTruncations(t *testing.T) {
	for name, body := range exampleBodies() {
		if name == "limits" {
			continue // 200 KiB of prefixes adds nothing the small bodies miss
		}
		encoded, err := format.AppendBody(nil, body)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(encoded) {
			_, err := format.DecodeBody(encoded[:n])
			requireErrorIs(t, err, format.ErrMalformedBody, name+" truncated")
		}
		_, err = format.DecodeBody(append(encoded, 0))
		requireErrorIs(t, err, format.ErrMalformedBody, name+" with a trailing byte")
	}
}

// setBodyField overwrites a little-endian field of an encoded body.
func setBodyField(encoded []byte, at, width int, value uint64) {
	switch width {
	case 2:
		littleEndian.PutUint16(encoded[at:], uint16(value))
	case 4:
		littleEndian.PutUint32(encoded[at:], uint32(value))
	}
}

func TestFormatBodyDecodeRejects(t *testing.T) {
	base := format.Body{Key: []byte("key"), Subject: []byte("subj"), Payload: []byte("payload"),
		Headers: []format.Header{{Name: "name", Value: []byte("value")}}}
	tests := []struct {
		name string
		edit func(b []byte) []byte
		want error
	}{
		{"version zero", func(b []byte) []byte { b[0] = 0; return b }, format.ErrMalformedBody},
		{"version two", func(b []byte) []byte { b[0] = format.BodyVersion + 1; return b }, format.ErrTooNew},
		{"version max", func(b []byte) []byte { b[0] = 0xff; return b }, format.ErrTooNew},
		{"key length over", func(b []byte) []byte { setBodyField(b, 4, 2, 4); return b }, format.ErrMalformedBody},
		{"key length max", func(b []byte) []byte { setBodyField(b, 4, 2, math.MaxUint16); return b }, format.ErrMalformedBody},
		{"subject length under", func(b []byte) []byte { setBodyField(b, 6, 2, 3); return b }, format.ErrMalformedBody},
		{"header bytes 4 GiB", func(b []byte) []byte { setBodyField(b, 8, 4, math.MaxUint32); return b }, format.ErrMalformedBody},
		{"payload 4 GiB", func(b []byte) []byte { setBodyField(b, 12, 4, math.MaxUint32); return b }, format.ErrMalformedBody},
		{"raw length differs", func(b []byte) []byte { setBodyField(b, 16, 4, 8); return b }, format.ErrMalformedBody},
		{"producer flag without producer bytes", func(b []byte) []byte { b[bodyFlagsAt] |= 1; return b }, format.ErrMalformedBody},
		{"header list cut inside a name", func(b []byte) []byte {
			// Move two bytes from the header list to the payload: the
			// lengths still add up but the list no longer parses.
			setBodyField(b, 8, 4, uint64(2+4+4+5-2))
			setBodyField(b, 12, 4, uint64(len("payload")+2))
			setBodyField(b, 16, 4, uint64(len("payload")+2))
			return b
		}, format.ErrMalformedBody},
		{"header value length over", func(b []byte) []byte {
			at := format.BodyFixedSize + 3 + 4 + 2 + 4
			littleEndian.PutUint32(b[at:], 6)
			return b
		}, format.ErrMalformedBody},
		{"header name length over", func(b []byte) []byte {
			littleEndian.PutUint16(b[format.BodyFixedSize+3+4:], math.MaxUint16)
			return b
		}, format.ErrMalformedBody},
		{"one stray byte in the header list", func(b []byte) []byte {
			// A list ending in a single byte cannot hold a name length.
			setBodyField(b, 8, 4, uint64(2+4+4+5+1))
			setBodyField(b, 12, 4, uint64(len("payload")-1))
			setBodyField(b, 16, 4, uint64(len("payload")-1))
			return b
		}, format.ErrMalformedBody},
	}
	for _, test := range tests {
		encoded, err := format.AppendBody(nil, base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := format.DecodeBody(encoded); err != nil {
			t.Fatalf("the unedited body fails: %v", err)
		}
		_, err = format.DecodeBody(test.edit(encoded))
		requireErrorIs(t, err, test.want, test.name)
	}
}

// TestFormatBodyUnknownFlagsIgnored pins today's behaviour: flag bits other
// than the producer bit are ignored, so the encoding is canonical only up
// to those bits.
func TestFormatBodyUnknownFlagsIgnored(t *testing.T) {
	encoded, err := format.AppendBody(nil, format.Body{Payload: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	littleEndian.PutUint16(encoded[bodyFlagsAt:], 0xfffe)
	view, err := format.DecodeBody(encoded)
	if err != nil || view.HasProducer {
		t.Fatalf("unknown body flags: %+v, %v", view, err)
	}
}

func TestFormatBodyHeadersStopEarly(t *testing.T) {
	encoded, err := format.AppendBody(nil, format.Body{Headers: []format.Header{
		{Name: "a", Value: []byte("1")}, {Name: "b", Value: []byte("2")}, {Name: "c", Value: []byte("3")}}})
	if err != nil {
		t.Fatal(err)
	}
	view, err := format.DecodeBody(encoded)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for name := range view.Headers() {
		seen = append(seen, string(name))
		if len(seen) == 2 {
			break
		}
	}
	if strings.Join(seen, ",") != "a,b" {
		t.Fatalf("headers seen before break: %v", seen)
	}
	// A view built by hand with a broken list yields what parses and stops.
	broken := format.BodyView{HeaderBytes: view.HeaderBytes[:len(view.HeaderBytes)-1]}
	seen = nil
	for name := range broken.Headers() {
		seen = append(seen, string(name))
	}
	if strings.Join(seen, ",") != "a,b" {
		t.Fatalf("headers of a truncated list: %v", seen)
	}
}

// TestFormatBodyDecodeDoesNotAllocate holds DecodeBody to its comment:
// readers decode a body per record served, so it must not allocate.
func TestFormatBodyDecodeDoesNotAllocate(t *testing.T) {
	encoded, err := format.AppendBody(nil, exampleBodies()["everything"])
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := format.DecodeBody(encoded); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("DecodeBody allocates %.1f times per call", allocs)
	}
}

// TestFormatBodyHugeLengthsDoNotAllocate declares 4 GiB fields in a tiny
// body: the lengths are checked against the input, never allocated.
func TestFormatBodyHugeLengthsDoNotAllocate(t *testing.T) {
	encoded, err := format.AppendBody(nil, format.Body{Payload: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	littleEndian.PutUint32(encoded[8:], math.MaxUint32)
	littleEndian.PutUint32(encoded[12:], math.MaxUint32)
	decode := func() {
		if _, err := format.DecodeBody(encoded); err == nil {
			t.Fatal("decoded a body declaring 8 GiB of fields")
		}
	}
	if perDecode := bytesAllocated(100, decode); perDecode > 4096 {
		t.Fatalf("%d bytes allocated per decode", perDecode)
	}
}
