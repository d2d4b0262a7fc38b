package producer

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/segment/vfs"
)

func openRegistry(t *testing.T, fsys vfs.FS, opts RegistryOptions) *Registry {
	t.Helper()
	r, err := OpenRegistry(fsys, "/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newDataFS(t *testing.T) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMemFS()
	if err := vfs.MkdirAllDurable(mem, "/data"); err != nil {
		t.Fatal(err)
	}
	return mem
}

func TestRegistryInitAndReopen(t *testing.T) {
	mem := newDataFS(t)
	r := openRegistry(t, mem, RegistryOptions{})
	a1, err := r.Init("orders")
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := r.Init("billing")
	a2, _ := r.Init("orders")
	if a1.ID != a2.ID || a2.Epoch != a1.Epoch+1 || b1.ID == a1.ID || b1.ID < a1.ID {
		t.Fatalf("identities %+v %+v %+v", a1, b1, a2)
	}
	if epoch, ok := r.Epoch(a1.ID); !ok || epoch != a2.Epoch {
		t.Fatalf("Epoch = %d, %v", epoch, ok)
	}
	if _, ok := r.Epoch(99); ok {
		t.Fatal("an id never issued has an epoch")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openRegistry(t, mem, RegistryOptions{})
	if epoch, _ := r.Epoch(a1.ID); epoch != a2.Epoch {
		t.Fatalf("epoch after reopen %d", epoch)
	}
	c, _ := r.Init("carts")
	if c.ID <= b1.ID {
		t.Fatalf("id %d issued again after reopen", c.ID)
	}
	if r.Generation() != 4 {
		t.Fatalf("generation %d", r.Generation())
	}
}

func TestRegistryRefusals(t *testing.T) {
	r := openRegistry(t, newDataFS(t), RegistryOptions{MaxNames: 2})
	for _, name := range []string{"", strings.Repeat("n", MaxNameBytes+1)} {
		if _, err := r.Init(name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Init(%q): %v", name, err)
		}
	}
	// Names are opaque: an account, a NUL and a client's bytes.
	first, err := r.Init("account\x00\xffname")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = r.Init("b")
	// A third name at the cap evicts the name initialised longest ago:
	// its id is forgotten (its records are refused as unknown), never
	// issued again.
	third, err := r.Init("c")
	if err != nil || third.ID != 3 {
		t.Fatalf("third name: %+v %v", third, err)
	}
	if _, known := r.Epoch(first.ID); known || r.Evicted() != 1 || r.Names() != 2 {
		t.Fatalf("after the eviction: id %d known %v, %d evicted, %d names", first.ID, known, r.Evicted(), r.Names())
	}
	if _, err := r.Init("b"); err != nil {
		t.Fatalf("a known name at the cap: %v", err)
	}
	// The newest id is never the one evicted (a rewrite lists only live
	// names, and the next id follows the highest listed); the file read
	// back evicts the same way.
	again, err := r.Init("account\x00\xffname")
	if err != nil || again.ID != 4 {
		t.Fatalf("an evicted name comes back with a new id: %+v %v", again, err)
	}
	if _, known := r.Epoch(2); known {
		t.Fatalf("b (initialised longest ago but for c, whose id is the newest) should have gone")
	}
	if _, known := r.Epoch(third.ID); !known {
		t.Fatalf("c holds the newest id and stays")
	}
}

func TestRegistryCompacts(t *testing.T) {
	mem := newDataFS(t)
	r := openRegistry(t, mem, RegistryOptions{})
	var last Identity
	for i := range 100 {
		last, _ = r.Init(fmt.Sprintf("p%d", i%3))
	}
	info, err := mem.Stat(path.Join("/data", RegistryFileName))
	if err != nil {
		t.Fatal(err)
	}
	if entries := (info.Size - registryHeaderSize) / (registryEntryHeader + registryBodyFixed + 2); entries > 6 {
		t.Fatalf("%d entries for 3 names: not compacted", entries)
	}
	r = openRegistry(t, mem, RegistryOptions{})
	if epoch, _ := r.Epoch(last.ID); epoch != last.Epoch || r.Generation() != 100 {
		t.Fatalf("after compaction: epoch %d generation %d", epoch, r.Generation())
	}
}

func TestRegistryIgnoresTornTail(t *testing.T) {
	mem := newDataFS(t)
	r := openRegistry(t, mem, RegistryOptions{})
	first, _ := r.Init("a")
	_ = r.Close()
	name := path.Join("/data", RegistryFileName)
	image, _ := vfs.ReadFile(mem, name)
	whole := appendEntry(nil, registration{name: "b", id: 2, epoch: 1, generation: 2})
	for cut := 1; cut < len(whole); cut++ {
		torn := append(append([]byte(nil), image...), whole[:cut]...)
		if err := vfs.WriteFileAtomic(mem, name, torn); err != nil {
			t.Fatal(err)
		}
		r := openRegistry(t, mem, RegistryOptions{})
		if _, ok := r.Epoch(2); ok || r.Generation() != 1 {
			t.Fatalf("cut %d: a torn entry was trusted", cut)
		}
		next, err := r.Init("c")
		if err != nil || next.ID != first.ID+1 {
			t.Fatalf("cut %d: Init after the torn tail: %+v %v", cut, next, err)
		}
		_ = r.Close()
		if err := vfs.WriteFileAtomic(mem, name, image); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRegistryCrashAtEveryWrite cuts the power at each mutating
// operation of a run of Inits (compactions included) and checks the
// image: every Init that returned is there with at least its epoch, no
// id names two producers, and the registry opens and takes Inits.
func TestRegistryCrashAtEveryWrite(t *testing.T) {
	names := []string{"a", "b", "a", "a", "c", "a", "b", "a", "a", "a"}
	for k := int64(0); ; k++ {
		cut := crashtest.CutAtWrite(newDataFS(t), k, vfs.CrashOptions{},
			vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: 0.5, Tear: true, Reorder: true})
		acked := map[string]Identity{}
		r, err := OpenRegistry(cut.FS(), "/data", RegistryOptions{})
		if err == nil {
			for _, name := range names {
				identity, err := r.Init(name)
				if err != nil {
					break
				}
				acked[name] = identity
			}
		}
		if !cut.Cut() {
			if k == 0 {
				t.Fatal("the workload wrote nothing")
			}
			return
		}
		for _, image := range cut.Images() {
			checkRegistryImage(t, image, k, acked)
		}
	}
}

func checkRegistryImage(t *testing.T, image *vfs.MemFS, k int64, acked map[string]Identity) {
	t.Helper()
	reopened, err := OpenRegistry(image, "/data", RegistryOptions{})
	if err != nil {
		t.Fatalf("cut at write %d: reopen: %v", k, err)
	}
	for name, identity := range acked {
		epoch, ok := reopened.Epoch(identity.ID)
		if !ok || epoch < identity.Epoch {
			t.Fatalf("cut at write %d: %s acked epoch %d, found %d %v", k, name, identity.Epoch, epoch, ok)
		}
		again, err := reopened.Init(name)
		if err != nil || again.ID != identity.ID || again.Epoch <= identity.Epoch {
			t.Fatalf("cut at write %d: Init(%s) after the crash: %+v %v", k, name, again, err)
		}
	}
	fresh, err := reopened.Init("fresh")
	if err != nil {
		t.Fatalf("cut at write %d: %v", k, err)
	}
	for _, identity := range acked {
		if fresh.ID == identity.ID {
			t.Fatalf("cut at write %d: id %d issued twice", k, fresh.ID)
		}
	}
}

func TestRegistryReserveIDs(t *testing.T) {
	mem := newDataFS(t)
	r := openRegistry(t, mem, RegistryOptions{})
	first, _ := r.Init("a")
	r.ReserveIDs(10)
	r.ReserveIDs(3) // never lowers
	next, _ := r.Init("b")
	if first.ID != 1 || next.ID != 11 {
		t.Fatalf("ids %d then %d, want 1 then 11", first.ID, next.ID)
	}
	_ = r.Close()
	r = openRegistry(t, mem, RegistryOptions{})
	if again, _ := r.Init("c"); again.ID != 12 {
		t.Fatalf("after reopen: id %d, want 12", again.ID)
	}
}
