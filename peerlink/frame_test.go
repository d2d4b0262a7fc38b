package peerlink

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestFramesRoundTripThroughEveryReaderShape(t *testing.T) {
	payloads := [][]byte{nil, []byte("a"), bytes.Repeat([]byte("x"), 100), bytes.Repeat([]byte("y"), 70_000)}
	var stream []byte
	for i, payload := range payloads {
		stream = appendFrame(stream, uint64(i)<<40|7, payload)
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole": func(r io.Reader) io.Reader { return r }, "one byte": iotest.OneByteReader,
		"half": iotest.HalfReader, "data then EOF": iotest.DataErrReader,
	}
	for name, shape := range readers {
		t.Run(name, func(t *testing.T) {
			frames := newFrameReader(bufio.NewReaderSize(shape(bytes.NewReader(stream)), 4096), 1<<20)
			for i, want := range payloads {
				channel, payload, err := frames.next()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if channel != uint64(i)<<40|7 || !bytes.Equal(payload, want) {
					t.Fatalf("frame %d: channel %x, %d bytes", i, channel, len(payload))
				}
			}
			if _, _, err := frames.next(); err != io.EOF {
				t.Fatalf("after the last frame: %v, want io.EOF", err)
			}
		})
	}
}

func TestFrameErrorsAreTyped(t *testing.T) {
	good := appendFrame(nil, 3, []byte("payload"))
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1
	short := bytes.Clone(good)
	le.PutUint32(short[0:4], 4)
	huge := bytes.Clone(good)
	le.PutUint32(huge[0:4], 1<<31)
	cases := []struct {
		name   string
		stream []byte
		want   error
	}{
		{"checksum", flipped, ErrFrameCorrupt},
		{"shorter than its channel", short, ErrFrameCorrupt},
		{"beyond the limit", huge, ErrFrameTooLarge},
		{"truncated payload", good[:len(good)-2], io.ErrUnexpectedEOF},
		{"truncated header", good[:5], io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frames := newFrameReader(bufio.NewReaderSize(bytes.NewReader(c.stream), 64), 1024)
			if _, _, err := frames.next(); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestHelloRoundTripAndRefusals(t *testing.T) {
	sent := hello{version: protocolVersion, refusal: refusalWrongNode, sender: 7, receiver: 9, cluster: "edge-a"}
	got, err := readHello(bytes.NewReader(sent.encode()))
	if err != nil || got != sent {
		t.Fatalf("got %+v, %v", got, err)
	}
	if !errors.Is(got.refusal.reason(), ErrWrongNode) || refusalFor(got.refusal.reason()) != refusalWrongNode {
		t.Fatalf("refusal code does not map back: %v", got.refusal.reason())
	}
	bad := sent.encode()
	bad[0] = 'X'
	if _, err := readHello(bytes.NewReader(bad)); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("bad magic: %v", err)
	}
	newer := sent
	newer.version = protocolVersion + 1
	if _, err := readHello(bytes.NewReader(newer.encode())); !errors.Is(err, ErrVersion) {
		t.Fatalf("newer version: %v", err)
	}
	flipped := sent.encode()
	flipped[10] ^= 1
	if _, err := readHello(bytes.NewReader(flipped)); !errors.Is(err, ErrHandshake) {
		t.Fatalf("flipped bit: %v", err)
	}
}
