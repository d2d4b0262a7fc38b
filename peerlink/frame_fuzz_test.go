package peerlink

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzFrameReader feeds arbitrary streams to the frame decoder, with read
// buffers small and large (both the zero-copy and the scratch path). It
// must never panic, must fail only with its typed errors, and every frame
// it returns must re-encode to exactly the bytes it consumed.
func FuzzFrameReader(f *testing.F) {
	var two []byte
	two = appendFrame(two, 1, []byte("first"))
	two = appendFrame(two, ControlChannel, nil)
	f.Add(two, uint8(0))
	f.Add(appendFrame(nil, 9, bytes.Repeat([]byte("z"), 300)), uint8(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}, uint8(2))
	f.Add([]byte{4, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, uint8(3))
	f.Fuzz(func(t *testing.T, stream []byte, shape uint8) {
		frames := newFrameReader(bufio.NewReaderSize(bytes.NewReader(stream), 16+int(shape)*4), 512)
		var reencoded []byte
		for {
			channel, payload, err := frames.next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrFrameCorrupt) && !errors.Is(err, ErrFrameTooLarge) &&
					!errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("untyped error: %v", err)
				}
				break
			}
			if len(payload) > 512 {
				t.Fatalf("payload of %d bytes passed a 512-byte limit", len(payload))
			}
			reencoded = appendFrame(reencoded, channel, payload)
		}
		if !bytes.HasPrefix(stream, reencoded) {
			t.Fatalf("decoded frames do not re-encode to the stream's prefix")
		}
	})
}

// FuzzHello feeds arbitrary greetings to the greeting decoder: no panic,
// typed errors only, and a greeting it accepts re-encodes to its bytes.
func FuzzHello(f *testing.F) {
	f.Add(hello{version: protocolVersion, sender: 1, receiver: 2, cluster: "c"}.encode())
	f.Add(hello{version: protocolVersion, refusal: refusalIdentity, sender: 3, receiver: 1, cluster: "edge.b_2"}.encode())
	f.Add([]byte("IBPL\x02\x00"))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		greeting, err := readHello(bytes.NewReader(stream))
		if err != nil {
			if !errors.Is(err, ErrHandshake) && !errors.Is(err, ErrBadMagic) && !errors.Is(err, ErrVersion) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if stream[7] == 0 && !bytes.HasPrefix(stream, greeting.encode()) { // byte 7 is reserved: ignored, not re-encoded
			t.Fatalf("greeting %+v does not re-encode to its bytes", greeting)
		}
	})
}
