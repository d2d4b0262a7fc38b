package keyindex

import (
	"errors"
	"testing"
)

// FuzzHeader: any block decodes to a header or a typed error, never a
// panic; what decodes re-encodes to the same 64 bytes.
func FuzzHeader(f *testing.F) {
	valid := make([]byte, blockSize)
	encodeHeader(valid, header{full: true, pages: 3, sequence: 9, covers: 1 << 40, seed: 77, entries: 5})
	f.Add(valid)
	f.Add(make([]byte, blockSize))
	f.Add(valid[:10])
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, errTooNew) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again := make([]byte, headerSize)
		encodeHeader(again, h)
		if string(again) != string(b[:headerSize]) {
			t.Fatalf("header %+v re-encodes differently", h)
		}
		if len(b) >= 2*blockSize {
			if _, _, err := pickHeader(b[:2*blockSize]); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, errTooNew) {
				t.Fatalf("pickHeader: untyped error %v", err)
			}
		}
	})
}

// FuzzPage: any page pair is either chosen (and its chosen copy then
// passes the checks and lists only used slots) or refused with
// ErrCorrupt; lookups over it never panic.
func FuzzPage(f *testing.F) {
	page := make([]byte, blockSize)
	writeSlot(page, 0, slot{check: 1, probe: 2, last: 3})
	writeSlot(page, 1, slot{check: 4, probe: 5, last: 6})
	sealPage(page, 0, 7, 2)
	f.Add(append(append([]byte(nil), page...), make([]byte, blockSize)...))
	f.Add(make([]byte, 2*blockSize))
	f.Add(page)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2*blockSize {
			b = append(b, make([]byte, 2*blockSize-len(b))...)
		}
		pair := b[:2*blockSize]
		c, err := pickPage(pair, 0)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		chosen := pair[c*blockSize : (c+1)*blockSize]
		if err := checkPage(chosen, 0); err != nil {
			t.Fatalf("chose a copy that fails its checks: %v", err)
		}
		for k := range pageUsed(chosen) {
			if readSlot(chosen, k).check == 0 {
				t.Fatalf("used slot %d is empty", k)
			}
		}
	})
}
