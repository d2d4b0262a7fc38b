package catalog

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzDecode: any bytes decode to a valid catalog or fail with a typed
// error; never a panic, and what decodes encodes and decodes to itself.
func FuzzDecode(f *testing.F) {
	for _, c := range []Catalog{{}, sample(1), sample(5)} {
		image, _ := Encode(c)
		f.Add(image)
	}
	f.Add([]byte(`{"format":"ironbus.streams","version":1,"crc32c":"00000000","catalog":{"streams":[{"name":"a","partitions":0}]}}`))
	f.Add([]byte(`{"format":"ironbus.streams","version":9}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, image []byte) {
		c, err := Decode(image)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooNew) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("decoded an invalid catalog: %v", err)
		}
		again, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(again)
		if err != nil || !reflect.DeepEqual(back.Streams, c.Streams) || !reflect.DeepEqual(back.Bindings, c.Bindings) {
			t.Fatalf("re-encode changed the catalog: %v", err)
		}
	})
}
