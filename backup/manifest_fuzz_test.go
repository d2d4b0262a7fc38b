package backup

import (
	"errors"
	"testing"
	"time"
)

func sampleManifest() Manifest {
	return Manifest{Schema: ManifestSchema, Created: time.Unix(1700000000, 0).UTC(), Source: "/var/lib/ironbus",
		DataFormatVersion: 1, SegmentFormatVersion: 1, Bytes: 10,
		Files: []File{{Path: "FORMAT", Kind: KindFormat, Size: 10, CRC32C: 7}},
		Logs:  []Range{{Stream: "orders", NextOffset: 3, Records: 3, Segments: 1}}}
}

func TestManifestRoundTripAndDamage(t *testing.T) {
	image, err := EncodeManifest(sampleManifest())
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeManifest(image)
	if err != nil || got.Files[0] != sampleManifest().Files[0] || got.Logs[0] != sampleManifest().Logs[0] {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for i := range image {
		damaged := append([]byte(nil), image...)
		damaged[i] ^= 0x10
		if _, err := DecodeManifest(damaged); err == nil {
			t.Fatalf("a flip at byte %d of %d went unnoticed", i, len(image))
		}
	}
	unsafe := sampleManifest()
	unsafe.Files[0].Path = "../etc/passwd"
	image, _ = EncodeManifest(unsafe)
	if _, err := DecodeManifest(image); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("unsafe path: %v", err)
	}
	newer := sampleManifest()
	newer.Schema = "ironbus.backup.manifest.v2"
	image, _ = EncodeManifest(newer)
	if _, err := DecodeManifest(image); !errors.Is(err, ErrTooNew) {
		t.Fatalf("newer schema: %v", err)
	}
}

func FuzzDecodeManifest(f *testing.F) {
	image, _ := EncodeManifest(sampleManifest())
	f.Add(image)
	f.Add([]byte("{}\ncrc32c 00000000\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptManifest) && !errors.Is(err, ErrTooNew) && !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		for _, file := range m.Files {
			if !safePath(file.Path) {
				t.Fatalf("accepted unsafe path %q", file.Path)
			}
		}
		again, err := EncodeManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeManifest(again); err != nil {
			t.Fatalf("re-encoded manifest fails: %v", err)
		}
	})
}
