package segment

import (
	"errors"
	"testing"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// FuzzInspectSegment feeds InspectSegment (what backup and scrub run on a
// file they did not write) a real segment image with the fuzzer's bytes
// written over part of it: it never panics, every failure is typed, and
// what it reports stays inside the image.
func FuzzInspectSegment(f *testing.F) {
	mem := vfs.NewMemFS()
	d := openDir(f, mem, testOptions(40))
	l := openLog(f, d)
	for i := uint64(0); i < 40; i++ {
		appendBody(f, l, body(i, 64))
	}
	waitTicket(f, appendBody(f, l, body(40, 64)))
	_ = d.Close()
	names, _ := mem.List("/data/streams/default/0")
	var name string
	var image []byte
	for _, candidate := range names {
		if _, ok := parseSegmentFileName(candidate); ok {
			name = candidate
			image, _ = vfs.ReadFile(mem, "/data/streams/default/0/"+candidate)
		}
	}
	f.Add(uint32(0), []byte{})
	f.Add(uint32(format.SegmentDataStart+10), []byte{0xff, 0x00, 0x13})
	f.Add(uint32(20), []byte("IRONBSEG"))
	f.Fuzz(func(t *testing.T, at uint32, patch []byte) {
		damaged := append([]byte(nil), image...)
		if int(at) < len(damaged) {
			copy(damaged[at:], patch)
		} else if len(patch) > 0 {
			damaged = damaged[:int(at)%(len(damaged)+1)]
		}
		for _, last := range []bool{true, false} {
			check, err := InspectSegment(defaultLog, name, damaged, last)
			if err != nil {
				if !errors.Is(err, ErrCorruptSegment) && !errors.Is(err, ErrTooNew) && !errors.Is(err, ErrInconsistent) {
					t.Fatalf("untyped error: %v", err)
				}
				continue
			}
			if check.ValidEnd < 0 || check.ValidEnd > int64(len(damaged)) || check.NextOffset < check.Base {
				t.Fatalf("check out of bounds: %+v for %d bytes", check, len(damaged))
			}
			for _, event := range check.Events {
				if event.ByteStart < 0 || event.ByteEnd > int64(len(damaged)) || event.ByteStart > event.ByteEnd {
					t.Fatalf("event outside the image: %+v", event)
				}
			}
		}
	})
}
