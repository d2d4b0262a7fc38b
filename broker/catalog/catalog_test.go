package catalog

import (
	"errors"
	"fmt"
	"path"
	"reflect"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

func sample(n int) Catalog {
	var c Catalog
	for i := 0; i < n; i++ {
		c.Put(Stream{Name: fmt.Sprintf("orders-%d", i), Partitions: uint32(i%8 + 1), MaxBytes: uint64(i) << 20,
			MaxAge: time.Duration(i) * time.Hour, Created: time.UnixMilli(1_700_000_000_000 + int64(i)).UTC(),
			DedupWindow: []time.Duration{0, DedupOff, time.Duration(i) * time.Second}[i%3]})
	}
	if n > 2 {
		c.Put(Stream{Name: "latest", Partitions: 1, Compact: true, DeleteRetention: 90 * time.Minute, CompactPastGroups: true})
		c.Put(Stream{Name: "latest-default", Partitions: 2, Compact: true})
	}
	if n > 0 {
		c.Bind(Binding{Pattern: "orders.>", Stream: "orders-0"})
	}
	return c
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, c := range []Catalog{{}, sample(1), sample(40)} {
		image, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(image)
		if err != nil {
			t.Fatalf("decode: %v\n%s", err, image)
		}
		if len(c.Streams) == 0 && len(got.Streams) == 0 && len(got.Bindings) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
		}
	}
}

func TestDedupWindowDefaultsAndOff(t *testing.T) {
	old := Stream{Name: "orders", Partitions: 1}
	if got := old.Dedup(); got != DefaultDedupWindow {
		t.Errorf("a stream without a dedup setting has window %v, want %v", got, DefaultDedupWindow)
	}
	if got := (Stream{DedupWindow: DedupOff}).Dedup(); got != 0 {
		t.Errorf("DedupOff reads as %v", got)
	}
	if !old.SameSettings(Stream{Name: "orders", Partitions: 1, DedupWindow: DefaultDedupWindow}) {
		t.Error("the default window asked for explicitly should be the same settings")
	}
	for _, bad := range []time.Duration{-2, MaxDedupWindow + time.Millisecond} {
		if err := ValidateStream(Stream{Name: "orders", Partitions: 1, DedupWindow: bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("window %v: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestValidateRefusesBadCatalogs(t *testing.T) {
	cases := map[string]Catalog{
		"bad name":         {Streams: []Stream{{Name: ".hidden", Partitions: 1}}},
		"zero partitions":  {Streams: []Stream{{Name: "a", Partitions: 0}}},
		"too many":         {Streams: []Stream{{Name: "a", Partitions: 1025}}},
		"repeated":         {Streams: []Stream{{Name: "a", Partitions: 1}, {Name: "a", Partitions: 1}}},
		"dangling binding": {Streams: []Stream{{Name: "a", Partitions: 1}}, Bindings: []Binding{{Pattern: "x", Stream: "b"}}},
		"empty pattern":    {Streams: []Stream{{Name: "a", Partitions: 1}}, Bindings: []Binding{{Pattern: "", Stream: "a"}}},
	}
	for name, c := range cases {
		if err := c.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if _, err := Encode(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Encode gave %v", name, err)
		}
	}
}

func TestDecodeRefusesDamageAndNewerVersions(t *testing.T) {
	image, _ := Encode(sample(3))
	flipped := append([]byte{}, image...)
	flipped[len(flipped)/2+7] ^= 0x01
	if _, err := Decode(flipped); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bit flip: %v", err)
	}
	newer := []byte(`{"format":"ironbus.streams","version":2,"crc32c":"00000000","catalog":{}}`)
	if _, err := Decode(newer); !errors.Is(err, ErrTooNew) {
		t.Fatalf("newer: %v", err)
	}
}

func TestStoreKeepsChangesAcrossReopen(t *testing.T) {
	fsys := vfs.NewMemFS()
	_ = fsys.MkdirAll("/data")
	store, rec, err := Open(fsys, "/data", Options{})
	if err != nil || rec.Source != "" || rec.Damaged() {
		t.Fatalf("fresh open: %v %+v", err, rec)
	}
	for i := 0; i < 3; i++ {
		s := Stream{Name: fmt.Sprintf("s%d", i), Partitions: 4}
		if err := store.Update(func(c *Catalog) error { c.Put(s); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Update(func(c *Catalog) error { c.Bind(Binding{Pattern: "a.*", Stream: "nope"}); return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("dangling binding accepted: %v", err)
	}
	again, rec, err := Open(fsys, "/data", Options{ReadOnly: true})
	if err != nil || rec.Source != FileName {
		t.Fatalf("reopen: %v %+v", err, rec)
	}
	if got := again.Catalog(); len(got.Streams) != 3 || len(got.Bindings) != 0 {
		t.Fatalf("reopened %+v", got)
	}
	if err := again.Update(func(*Catalog) error { return nil }); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only update: %v", err)
	}
}

// A damaged streams.json falls back to the previous copy, is reported and
// moved aside; with no intact copy the catalog is empty, never an error.
func TestStoreFallsBackFromDamage(t *testing.T) {
	fsys := vfs.NewMemFS()
	_ = fsys.MkdirAll("/data")
	store, _, _ := Open(fsys, "/data", Options{})
	_ = store.Update(func(c *Catalog) error { c.Put(Stream{Name: "old", Partitions: 1}); return nil })
	_ = store.Update(func(c *Catalog) error { c.Put(Stream{Name: "new", Partitions: 2}); return nil })
	damage(t, fsys, path.Join("/data", FileName))
	reopened, rec, err := Open(fsys, "/data", Options{})
	if err != nil || rec.Source != previousName || !rec.Damaged() || rec.Kept != damagedName {
		t.Fatalf("fallback: %v %+v", err, rec)
	}
	if c := reopened.Catalog(); len(c.Streams) != 1 || c.Streams[0].Name != "old" {
		t.Fatalf("fallback catalog %+v", c)
	}
	// The next save keeps the intact copy as its previous version.
	_ = reopened.Update(func(c *Catalog) error { c.Put(Stream{Name: "third", Partitions: 1}); return nil })
	if image, _ := vfs.ReadFile(fsys, path.Join("/data", previousName)); image == nil {
		t.Fatal("no previous copy")
	} else if c, err := Decode(image); err != nil || len(c.Streams) != 1 {
		t.Fatalf("previous copy %+v %v", c, err)
	}
	damage(t, fsys, path.Join("/data", FileName))
	damage(t, fsys, path.Join("/data", previousName))
	empty, rec, err := Open(fsys, "/data", Options{ReadOnly: true})
	if err != nil || rec.Source != "" || !rec.Damaged() || len(empty.Catalog().Streams) != 0 {
		t.Fatalf("both damaged: %v %+v", err, rec)
	}
}

func damage(t *testing.T, fsys vfs.FS, name string) {
	t.Helper()
	file, err := fsys.OpenFile(name, vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.WriteAt([]byte("XX"), 40); err != nil {
		t.Fatal(err)
	}
}

// A power cut at any file-system operation of a save leaves the catalog
// before the save or after it, never a mix and never an error.
func TestStoreCrashAtEveryStep(t *testing.T) {
	before := sample(2)
	after := before.Clone()
	after.Put(Stream{Name: "added", Partitions: 16, MaxRecords: 1000})
	after.Bind(Binding{Pattern: "added.>", Stream: "added"})
	for cut := 0; ; cut++ {
		mem := vfs.NewMemFS()
		_ = mem.MkdirAll("/data")
		_ = mem.SyncDir("/")
		ops, cuts := 0, []*vfs.MemFS{}
		fsys := vfs.Inject(mem, vfs.InjectorFunc(func(op vfs.Op) error {
			if op.Kind.IsMutation() {
				if ops == cut {
					for seed := uint64(0); seed < 4; seed++ {
						cuts = append(cuts, mem.CrashClone(vfs.CrashOptions{Seed: seed, KeepUnsynced: float64(seed) / 3, Reorder: true, Tear: true}))
					}
				}
				ops++
			}
			return nil
		}))
		store, _, err := Open(fsys, "/data", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Update(func(c *Catalog) error { *c = before.Clone(); return nil }); err != nil {
			t.Fatal(err)
		}
		firstSave := ops
		if err := store.Update(func(c *Catalog) error { *c = after.Clone(); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(cuts) == 0 {
			if cut < 4 {
				t.Fatalf("only %d mutations", ops)
			}
			return
		}
		for _, crashed := range cuts {
			got, rec, err := Open(crashed, "/data", Options{})
			if err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
			c := got.Catalog()
			// A cut in the first save may leave the empty catalog before it.
			empty := cut < firstSave && len(c.Streams) == 0 && len(c.Bindings) == 0
			if !reflect.DeepEqual(c, before) && !reflect.DeepEqual(c, after) && !empty {
				t.Fatalf("cut %d: read %+v (%+v)", cut, c, rec)
			}
			if rec.Damaged() {
				t.Fatalf("cut %d: a crash left damage: %+v", cut, rec)
			}
		}
	}
}

// TestOldCatalogReadsAsNotCompacted decodes a stream entry written before
// compaction existed, and refuses a delete retention without compaction.
func TestOldCatalogReadsAsNotCompacted(t *testing.T) {
	image, err := Encode(Catalog{Streams: []Stream{{Name: "plain", Partitions: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(image)
	if err != nil || got.Streams[0].Compact || got.Streams[0].DeleteRetention != 0 {
		t.Fatalf("old entry: %+v %v", got, err)
	}
	if err := ValidateStream(Stream{Name: "x", Partitions: 1, DeleteRetention: time.Hour}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("delete retention without compaction: %v", err)
	}
}
