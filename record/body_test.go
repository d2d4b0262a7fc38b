package record_test

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/ironbus/ironbus/internal/codectest"
	"github.com/ironbus/ironbus/record"
)

// bodyFromView copies a decoded view back into a Body, the inverse of
// AppendBody, so tests can compare and re-encode.
func bodyFromView(v record.View) record.Body {
	b := record.Body{
		Codec:       v.Codec,
		Key:         v.Key,
		Subject:     v.Subject,
		Payload:     v.Payload,
		RawLength:   v.RawLength,
		HasProducer: v.HasProducer,
		ProducerID:  v.ProducerID,
		Sequence:    v.Sequence,
		Tombstone:   v.Tombstone,
	}
	for name, value := range v.Headers() {
		b.Headers = append(b.Headers, record.Header{Name: string(name), Value: value})
	}
	return b
}

// normalizeBody maps the encodings AppendBody treats alike onto one value:
// nil and empty byte fields, and an unset RawLength on an uncompressed
// payload (the encoder fills in the payload length).
func normalizeBody(b record.Body) record.Body {
	orEmpty := func(s []byte) []byte {
		if s == nil {
			return []byte{}
		}
		return s
	}
	b.Key, b.Subject, b.Payload = orEmpty(b.Key), orEmpty(b.Subject), orEmpty(b.Payload)
	if b.Codec == record.CodecNone {
		b.RawLength = uint32(len(b.Payload))
	}
	if !b.HasProducer {
		b.ProducerID, b.Sequence = 0, 0
	}
	var headers []record.Header
	for _, h := range b.Headers {
		headers = append(headers, record.Header{Name: h.Name, Value: orEmpty(h.Value)})
	}
	b.Headers = headers
	return b
}

func exampleBodies() map[string]record.Body {
	return map[string]record.Body{
		"empty":        {},
		"payload only": {Payload: []byte("hello")},
		"key subject payload": {Key: []byte("user-42"), Subject: []byte("orders.created"),
			Payload: []byte(`{"id":1}`)},
		"producer":          {HasProducer: true, ProducerID: math.MaxUint64, Sequence: 1 << 40, Payload: []byte("p")},
		"producer zero ids": {HasProducer: true},
		"headers": {Headers: []record.Header{
			{Name: "content-type", Value: []byte("application/json")},
			{Name: "", Value: []byte("empty name")},
			{Name: "empty value", Value: nil},
			{Name: "binary", Value: []byte{0, 1, 2, 0xff}},
			{Name: "content-type", Value: []byte("repeated names are kept in order")},
		}, Payload: []byte("x")},
		"lz4":                {Codec: record.CodecLZ4, Payload: []byte{0x10, 'a'}, RawLength: 1},
		"zstd":               {Codec: record.CodecZstd, Payload: []byte{0x28, 0xb5, 0x2f, 0xfd}, RawLength: 1 << 20},
		"zstd raw 0":         {Codec: record.CodecZstd, Payload: []byte{1}, RawLength: 0},
		"unknown code":       {Codec: record.Codec(77), Payload: []byte("stored as sent"), RawLength: 3},
		"raw length matches": {Codec: record.CodecNone, Payload: []byte("abc"), RawLength: 3},
		"everything": {Codec: record.CodecZstd, Key: []byte("k"), Subject: []byte("s"),
			Headers: []record.Header{{Name: "h", Value: []byte("v")}}, Payload: []byte("zz"), RawLength: 99,
			HasProducer: true, ProducerID: 7, Sequence: 8},
		"limits": {Key: bytes.Repeat([]byte("k"), math.MaxUint16), Subject: bytes.Repeat([]byte("s"), math.MaxUint16),
			Headers: []record.Header{{Name: strings.Repeat("n", math.MaxUint16), Value: bytes.Repeat([]byte("v"), 1000)}},
			Payload: bytes.Repeat([]byte("p"), record.BodyHashThreshold)},
	}
}

func TestRoundTripBody(t *testing.T) {
	for name, body := range exampleBodies() {
		encoded, err := record.AppendBody(nil, body)
		if err != nil {
			t.Fatalf("%s: AppendBody: %v", name, err)
		}
		if len(encoded) != record.BodySize(body) {
			t.Fatalf("%s: encoded %d bytes, BodySize says %d", name, len(encoded), record.BodySize(body))
		}
		view, err := record.Parse(encoded)
		if err != nil {
			t.Fatalf("%s: Parse: %v", name, err)
		}
		if view.Version != record.BodyVersion {
			t.Fatalf("%s: version %d", name, view.Version)
		}
		checkBodyView(t, encoded, view)
		if got, want := normalizeBody(bodyFromView(view)), normalizeBody(body); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: decoded %+v\nwant %+v", name, got, want)
		}
		again, err := record.AppendBody(nil, bodyFromView(view))
		if err != nil || !bytes.Equal(again, encoded) {
			t.Fatalf("%s: re-encoding the decoded body differs (%v)", name, err)
		}
	}
}

// checkBodyView checks the invariants every successfully decoded body must
// satisfy: the parts exactly tile the input, each part aliases the input
// with its capacity clipped (so appending to one field cannot overwrite the
// next), and the header list walks to its end.
func checkBodyView(t testing.TB, encoded []byte, v record.View) {
	t.Helper()
	prefix := record.BodyFixedSize
	if v.HasProducer {
		prefix += record.BodyProducerSize
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
	if v.Codec == record.CodecNone && v.RawLength != uint32(len(v.Payload)) {
		t.Fatalf("uncompressed payload of %d bytes with raw length %d", len(v.Payload), v.RawLength)
	}
	if v.Version == 0 || v.Version > record.BodyVersion {
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
	body := record.Body{Key: []byte("k"), Payload: []byte("payload"), HasProducer: true, ProducerID: 3}
	alone, err := record.AppendBody(nil, body)
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
		got, err := record.AppendBody(dst, body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], alone) {
			t.Fatalf("capacity %d: AppendBody to a non-empty dst differs", capacity)
		}
	}
}

func TestBodyEncodeRejects(t *testing.T) {
	long := make([]byte, math.MaxUint16+1)
	tests := map[string]record.Body{
		"key too long":       {Key: long},
		"subject too long":   {Subject: long},
		"header name long":   {Headers: []record.Header{{Name: string(long)}}},
		"raw length differs": {Codec: record.CodecNone, Payload: []byte("abc"), RawLength: 4},
	}
	for name, body := range tests {
		dst := []byte("keep")
		got, err := record.AppendBody(dst, body)
		codectest.RequireErrorIs(t, err, record.ErrMalformed, name)
		if !bytes.Equal(got, []byte("keep")) {
			t.Errorf("%s: AppendBody changed dst on error: %q", name, got)
		}
	}
}

func TestBodyTruncations(t *testing.T) {
	for name, body := range exampleBodies() {
		if name == "limits" {
			continue // 200 KiB of prefixes adds nothing the small bodies miss
		}
		encoded, err := record.AppendBody(nil, body)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(encoded) {
			_, err := record.Parse(encoded[:n])
			codectest.RequireErrorIs(t, err, record.ErrMalformed, name+" truncated")
		}
		_, err = record.Parse(append(encoded, 0))
		codectest.RequireErrorIs(t, err, record.ErrMalformed, name+" with a trailing byte")
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

func TestBodyDecodeRejects(t *testing.T) {
	base := record.Body{Key: []byte("key"), Subject: []byte("subj"), Payload: []byte("payload"),
		Headers: []record.Header{{Name: "name", Value: []byte("value")}}}
	tests := []struct {
		name string
		edit func(b []byte) []byte
		want error
	}{
		{"version zero", func(b []byte) []byte { b[0] = 0; return b }, record.ErrMalformed},
		{"version two", func(b []byte) []byte { b[0] = record.BodyVersion + 1; return b }, record.ErrTooNew},
		{"version max", func(b []byte) []byte { b[0] = 0xff; return b }, record.ErrTooNew},
		{"key length over", func(b []byte) []byte { setBodyField(b, 4, 2, 4); return b }, record.ErrMalformed},
		{"key length max", func(b []byte) []byte { setBodyField(b, 4, 2, math.MaxUint16); return b }, record.ErrMalformed},
		{"subject length under", func(b []byte) []byte { setBodyField(b, 6, 2, 3); return b }, record.ErrMalformed},
		{"header bytes 4 GiB", func(b []byte) []byte { setBodyField(b, 8, 4, math.MaxUint32); return b }, record.ErrMalformed},
		{"payload 4 GiB", func(b []byte) []byte { setBodyField(b, 12, 4, math.MaxUint32); return b }, record.ErrMalformed},
		{"raw length differs", func(b []byte) []byte { setBodyField(b, 16, 4, 8); return b }, record.ErrMalformed},
		{"producer flag without producer bytes", func(b []byte) []byte { b[bodyFlagsAt] |= 1; return b }, record.ErrMalformed},
		{"header list cut inside a name", func(b []byte) []byte {
			// Move two bytes from the header list to the payload: the
			// lengths still add up but the list no longer parses.
			setBodyField(b, 8, 4, uint64(2+4+4+5-2))
			setBodyField(b, 12, 4, uint64(len("payload")+2))
			setBodyField(b, 16, 4, uint64(len("payload")+2))
			return b
		}, record.ErrMalformed},
		{"header value length over", func(b []byte) []byte {
			at := record.BodyFixedSize + 3 + 4 + 2 + 4
			littleEndian.PutUint32(b[at:], 6)
			return b
		}, record.ErrMalformed},
		{"header name length over", func(b []byte) []byte {
			littleEndian.PutUint16(b[record.BodyFixedSize+3+4:], math.MaxUint16)
			return b
		}, record.ErrMalformed},
		{"one stray byte in the header list", func(b []byte) []byte {
			// A list ending in a single byte cannot hold a name length.
			setBodyField(b, 8, 4, uint64(2+4+4+5+1))
			setBodyField(b, 12, 4, uint64(len("payload")-1))
			setBodyField(b, 16, 4, uint64(len("payload")-1))
			return b
		}, record.ErrMalformed},
	}
	for _, test := range tests {
		encoded, err := record.AppendBody(nil, base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := record.Parse(encoded); err != nil {
			t.Fatalf("the unedited body fails: %v", err)
		}
		_, err = record.Parse(test.edit(encoded))
		codectest.RequireErrorIs(t, err, test.want, test.name)
	}
}

// TestBodyUnknownFlagsIgnored pins the rule that flag bits other than
// the producer and tombstone bits are ignored, so the encoding is
// canonical only up to those bits.
func TestBodyUnknownFlagsIgnored(t *testing.T) {
	encoded, err := record.AppendBody(nil, record.Body{Payload: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	littleEndian.PutUint16(encoded[bodyFlagsAt:], 0xfffc)
	view, err := record.Parse(encoded)
	if err != nil || view.HasProducer || view.Tombstone {
		t.Fatalf("unknown body flags: %+v, %v", view, err)
	}
}

func TestBodyHeadersStopEarly(t *testing.T) {
	encoded, err := record.AppendBody(nil, record.Body{Headers: []record.Header{
		{Name: "a", Value: []byte("1")}, {Name: "b", Value: []byte("2")}, {Name: "c", Value: []byte("3")}}})
	if err != nil {
		t.Fatal(err)
	}
	view, err := record.Parse(encoded)
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
	broken := record.View{HeaderBytes: view.HeaderBytes[:len(view.HeaderBytes)-1]}
	seen = nil
	for name := range broken.Headers() {
		seen = append(seen, string(name))
	}
	if strings.Join(seen, ",") != "a,b" {
		t.Fatalf("headers of a truncated list: %v", seen)
	}
}

// TestBodyDecodeDoesNotAllocate holds Parse to its comment:
// readers decode a body per record served, so it must not allocate.
func TestBodyDecodeDoesNotAllocate(t *testing.T) {
	encoded, err := record.AppendBody(nil, exampleBodies()["everything"])
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := record.Parse(encoded); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Parse allocates %.1f times per call", allocs)
	}
}

// TestBodyHugeLengthsDoNotAllocate declares 4 GiB fields in a tiny
// body: the lengths are checked against the input, never allocated.
func TestBodyHugeLengthsDoNotAllocate(t *testing.T) {
	encoded, err := record.AppendBody(nil, record.Body{Payload: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	littleEndian.PutUint32(encoded[8:], math.MaxUint32)
	littleEndian.PutUint32(encoded[12:], math.MaxUint32)
	decode := func() {
		if _, err := record.Parse(encoded); err == nil {
			t.Fatal("decoded a body declaring 8 GiB of fields")
		}
	}
	if perDecode := bytesAllocated(100, decode); perDecode > 4096 {
		t.Fatalf("%d bytes allocated per decode", perDecode)
	}
}
