package wire

import "testing"

// The produce path's per-frame work: these must not allocate (the broker
// and client tests check the same end to end).

func benchmarkProduceFrame(b *testing.B, payloadBytes int) []byte {
	b.Helper()
	return Append(nil, 7, &Produce{Stream: []byte("orders"), BodyCRC: 0xdeadbeef, Body: make([]byte, payloadBytes)})
}

func BenchmarkParseAndDecodeProduce(b *testing.B) {
	frame := benchmarkProduceFrame(b, 256)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		f, n, err := ParseFrame(frame, DefaultMaxFrame)
		if err != nil || n != len(frame) {
			b.Fatal(err)
		}
		if _, err := DecodeProduce(f.Body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendProduce(b *testing.B) {
	message := &Produce{Stream: []byte("orders"), BodyCRC: 0xdeadbeef, Body: make([]byte, 256)}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = Append(buf[:0], 7, message)
	}
}

func BenchmarkAppendProduceAck(b *testing.B) {
	buf := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for i := range 256 { // one write's worth of acks
			buf = AppendProduceAck(buf, uint32(i), 0, uint64(i))
		}
	}
}
