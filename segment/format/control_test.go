package format_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ironbus/ironbus/internal/codectest"
	"github.com/ironbus/ironbus/segment/format"
)

var exampleControl = format.Control{Token: 0x0123456789abcdef, Type: 1, Payload: []byte("configuration change")}

func TestRoundTripControl(t *testing.T) {
	for _, c := range []format.Control{exampleControl, {Token: 7}, {Type: 255, Payload: make([]byte, 1000)}} {
		frame := format.AppendControl([]byte("prefix"), c)[len("prefix"):]
		if len(frame) != format.ControlFrameSize(len(c.Payload)) {
			t.Fatalf("control frame of %d bytes, want %d", len(frame), format.ControlFrameSize(len(c.Payload)))
		}
		if format.PeekKind(frame) != format.KindControl {
			t.Fatalf("PeekKind = %v", format.PeekKind(frame))
		}
		got, err := format.DecodeControl(append(frame, "trailing"...), 1<<20)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if got.Token != c.Token || got.Type != c.Type || !bytes.Equal(got.Payload, c.Payload) {
			t.Fatalf("decoded %+v, want %+v", got, c)
		}
	}
}

func TestFormatControlRejects(t *testing.T) {
	frame := format.AppendControl(nil, exampleControl)
	for n := range len(frame) {
		_, err := format.DecodeControl(frame[:n], 1<<20)
		codectest.RequireErrorIs(t, err, format.ErrShort, "prefix")
	}
	if _, err := format.DecodeControl(frame, uint32(len(exampleControl.Payload)-1)); !errors.Is(err, format.ErrCorrupt) {
		t.Fatalf("payload over the limit: %v", err)
	}
	edits := []struct {
		name  string
		edit  func([]byte)
		class error
	}{
		{"magic", func(b []byte) { b[1] = 'C' }, format.ErrCorrupt},
		{"header bit", func(b []byte) { b[16] ^= 1 }, format.ErrCorrupt},
		{"payload bit", func(b []byte) { b[40] ^= 1 }, format.ErrCorrupt},
		{"version zero", func(b []byte) { b[versionByte] = 0; resealControl(b) }, format.ErrCorrupt},
		{"version newer", func(b []byte) { b[versionByte] = format.FrameVersion + 1; resealControl(b) }, format.ErrTooNew},
		{"length", func(b []byte) { littleEndian.PutUint32(b[4:], uint32(len(b)+1)); resealControl(b) }, format.ErrCorrupt},
		{"payload length", func(b []byte) { littleEndian.PutUint32(b[20:], 1); resealControl(b) }, format.ErrCorrupt},
	}
	for _, e := range edits {
		b := bytes.Clone(frame)
		e.edit(b)
		_, err := format.DecodeControl(b, 1<<20)
		codectest.RequireErrorIs(t, err, e.class, "control "+e.name)
	}
}

// resealControl recomputes a control frame's header checksum.
func resealControl(b []byte) {
	littleEndian.PutUint32(b[28:32], format.CRC(b[:28]))
}

func FuzzDecodeControl(f *testing.F) {
	f.Add(format.AppendControl(nil, exampleControl), false)
	f.Add(format.AppendControl(nil, format.Control{}), true)
	f.Add(format.AppendControl(nil, exampleControl)[:40], true)
	f.Add([]byte("IK\x01\x00\xff\xff\xff\xff"), true)
	f.Fuzz(func(t *testing.T, input []byte, repair bool) {
		data := bytes.Clone(input)
		if repair && len(data) >= format.ControlHeaderSize {
			resealControl(data)
			if n := int(littleEndian.Uint32(data[20:24])); n <= len(data)-format.ControlHeaderSize {
				littleEndian.PutUint32(data[24:28], format.CRC(data[format.ControlHeaderSize:format.ControlHeaderSize+n]))
				resealControl(data)
			}
		}
		c, err := format.DecodeControl(data, 1<<16)
		if err != nil {
			codectest.RequireKnownError(t, err, "control", knownErrors...)
			for _, n := range codectest.PrefixLengths(len(data), format.ControlHeaderSize) {
				if _, prefixErr := format.DecodeControl(data[:n], 1<<16); prefixErr == nil {
					t.Fatalf("prefix of %d bytes decodes but the whole fails: %v", n, err)
				}
			}
			return
		}
		size := format.ControlFrameSize(len(c.Payload))
		if len(c.Payload) > 1<<16 || size > len(data) {
			t.Fatalf("accepted a payload of %d bytes from %d", len(c.Payload), len(data))
		}
		again := format.AppendControl(nil, c)
		want := bytes.Clone(data[:size])
		want[flagsByte] = 0
		clear(want[17:20])
		resealControl(want)
		if !bytes.Equal(again, want) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, want)
		}
		if _, err := format.DecodeControl(data[:size-1], 1<<16); !errors.Is(err, format.ErrShort) {
			t.Fatalf("one byte short: %v", err)
		}
	})
}
