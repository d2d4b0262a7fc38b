package producer

import (
	"errors"
	"path"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// FuzzDecodeTable feeds arbitrary bytes to the snapshot decoder: it
// either refuses them with ErrSnapshot or yields a table that encodes
// back to a snapshot it accepts with the same answers.
func FuzzDecodeTable(f *testing.F) {
	gens := newFakeGenerations()
	gens.init(1)
	gens.init(2)
	table := NewTable(gens, TableOptions{RingBatches: 2})
	table.Record(1, 0, 0)
	table.Record(1, 1, 1)
	table.Record(2, 5, 3)
	table.Record(1, 2, 4)
	f.Add(table.Encode(10))
	f.Add(NewTable(gens, TableOptions{}).Encode(0))
	f.Fuzz(func(t *testing.T, data []byte) {
		loaded, covers, err := DecodeTable(gens, TableOptions{MaxProducers: 4, RingBatches: 2}, data)
		if err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		again, covers2, err := DecodeTable(gens, TableOptions{MaxProducers: 4, RingBatches: 2}, loaded.Encode(covers))
		if err != nil || covers2 != covers {
			t.Fatalf("re-encoded snapshot refused: %v", err)
		}
		for id := range uint64(4) {
			n1, ok1 := loaded.Next(id)
			n2, ok2 := again.Next(id)
			if n1 != n2 || ok1 != ok2 {
				t.Fatalf("producer %d: %d %v, then %d %v", id, n1, ok1, n2, ok2)
			}
		}
	})
}

// FuzzOpenRegistry opens arbitrary bytes as a registry file: it is
// refused as a foreign format or opened with whatever valid prefix it
// has, and then takes an Init that issues a fresh id.
func FuzzOpenRegistry(f *testing.F) {
	seed := vfs.NewMemFS()
	_ = seed.MkdirAll("/data")
	r, _ := OpenRegistry(seed, "/data", RegistryOptions{})
	_, _ = r.Init("a")
	_, _ = r.Init("b")
	_, _ = r.Init("a")
	_ = r.Close()
	image, _ := vfs.ReadFile(seed, path.Join("/data", RegistryFileName))
	f.Add(image)
	f.Add([]byte(registryMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewMemFS()
		_ = mem.MkdirAll("/data")
		if err := vfs.WriteFileAtomic(mem, path.Join("/data", RegistryFileName), data); err != nil {
			t.Fatal(err)
		}
		r, err := OpenRegistry(mem, "/data", RegistryOptions{MaxNames: 8})
		if err != nil {
			if !errors.Is(err, ErrRegistryFormat) {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		identity, err := r.Init("fuzz-new-name")
		if err != nil {
			t.Fatalf("Init after open: %v", err)
		}
		r.mu.Lock()
		for _, reg := range r.ids {
			if reg.id == identity.ID && reg.name != "fuzz-new-name" {
				t.Fatalf("id %d issued again (was %q)", identity.ID, reg.name)
			}
		}
		r.mu.Unlock()
	})
}
