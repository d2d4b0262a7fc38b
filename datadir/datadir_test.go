package datadir

import (
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
	"github.com/ironbus/ironbus/subject"
)

func TestChangesAnswerWithTypedErrors(t *testing.T) {
	mem := seed(t)
	d, _ := openDir(t, mem, true)
	defer d.Close()
	if _, err := d.CreateStream(catalog.Stream{Name: "orders", Partitions: 5}); !errors.Is(err, ErrStreamExists) {
		t.Fatalf("create with other settings: %v", err)
	}
	if s, err := d.CreateStream(catalog.Stream{Name: "orders", Partitions: 2, MaxRecords: 100}); err != nil || s.Partitions != 2 {
		t.Fatalf("create again with the same settings: %+v %v", s, err)
	}
	if _, err := d.CreateStream(catalog.Stream{Name: ".hidden", Partitions: 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad name: %v", err)
	}
	var ambiguous *subject.AmbiguousError
	if err := d.Bind("orders.eu", "audit"); !errors.Is(err, ErrOverlap) || !errors.As(err, &ambiguous) {
		t.Fatalf("overlapping bind: %v", err)
	}
	if err := d.Bind("a..b", "audit"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad pattern: %v", err)
	}
	if err := d.Bind("x.>", "missing"); !errors.Is(err, ErrNoSuchStream) {
		t.Fatalf("bind to a missing stream: %v", err)
	}
	if err := d.Unbind("nope"); !errors.Is(err, ErrNoSuchBinding) {
		t.Fatalf("unbind: %v", err)
	}
	if err := d.RemoveStream("missing"); !errors.Is(err, ErrNoSuchStream) {
		t.Fatalf("remove: %v", err)
	}
	if _, err := d.Log(segment.LogID{Stream: "audit", Partition: 7}); !errors.Is(err, ErrNoSuchLog) || !errors.Is(err, segment.ErrNotFound) {
		t.Fatalf("missing log: %v", err)
	}
	if _, _, err := d.Group(segment.LogID{Stream: "orders"}, "nobody"); !errors.Is(err, ErrNoSuchGroup) {
		t.Fatalf("missing group: %v", err)
	}
}

// A shared open writes nothing, not even to finish a removal, and
// refuses changes.
func TestSharedOpenWritesNothing(t *testing.T) {
	mem := seed(t)
	interrupted := interruptedRemoval(t, mem)
	mutations := 0
	fsys := vfs.Inject(interrupted, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind.IsMutation() {
			mutations++
		}
		return nil
	}))
	d, rec, err := Open(fsys, root, Options{Storage: storage()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Stream("orders"); !errors.Is(err, ErrNoSuchStream) || len(rec.Removed) != 1 {
		t.Fatalf("a shared open still sees the removed stream: %v %+v", err, rec)
	}
	if err := d.Bind("x.>", "audit"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("bind on a shared open: %v", err)
	}
	if _, _, err := d.RemoveGroup(segment.LogID{Stream: "audit"}, "g"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("group change on a shared open: %v", err)
	}
	_ = d.Close()
	if mutations != 0 {
		t.Fatalf("a shared open made %d mutations", mutations)
	}
}

// interruptedRemoval returns a crash image of a removal of orders cut
// right after its commit point: the directory is aside, the catalog
// still names the stream.
func interruptedRemoval(t *testing.T, base *vfs.MemFS) *vfs.MemFS {
	t.Helper()
	mem := base.CrashClone(vfs.CrashOptions{})
	d, _ := openDir(t, mem, true)
	if _, err := moveAside(mem, root, "orders"); err != nil {
		t.Fatal(err)
	}
	_ = d.Close()
	return mem.CrashClone(vfs.CrashOptions{})
}

// The broker removes a stream and a publish recreates it before the old
// files are deleted; a crash then keeps the new stream and deletes only
// the old files.
func TestCrashAfterARemovedStreamIsRecreated(t *testing.T) {
	mem := seed(t)
	d, _ := openDir(t, mem, true)
	for p := range uint32(2) {
		l, _ := d.Log(segment.LogID{Stream: "orders", Partition: p})
		_ = l.Close()
	}
	aside, err := d.Streams().Remove("orders")
	if err != nil || aside == "" {
		t.Fatalf("remove: %q %v", aside, err)
	}
	if _, err := d.CreateStream(catalog.Stream{Name: "orders", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	image := mem.CrashClone(vfs.CrashOptions{})
	_ = d.Close()
	state := observe(t, image)
	if !strings.Contains(state, "stream orders 1 partitions max records 0: [{0 0 0}], 0 groups") || strings.Contains(state, "binding orders.>") {
		t.Fatalf("after the crash:\n%s", state)
	}
}

// A data directory with logs and no catalog (from before named streams)
// has its streams adopted, durably, by an exclusive open.
func TestLogsWithoutACatalogAreAdopted(t *testing.T) {
	mem := seed(t)
	for _, name := range []string{catalog.FileName, catalog.FileName + ".prev"} {
		_ = mem.Remove(path.Join(root, name))
	}
	d, rec := openDir(t, mem, true)
	if len(rec.Adopted) != 2 {
		t.Fatalf("adopted %+v", rec.Adopted)
	}
	if s, err := d.Stream("orders"); err != nil || s.Partitions != 2 {
		t.Fatalf("orders: %+v %v", s, err)
	}
	_ = d.Close()
	again, rec := openDir(t, mem, false)
	defer again.Close()
	if len(rec.Adopted) != 0 || rec.Catalog.Source != catalog.FileName {
		t.Fatalf("the adoption was not written: %+v", rec)
	}
}

func TestRefuseDamage(t *testing.T) {
	mem := seed(t)
	file, err := mem.OpenFile(path.Join(root, catalog.FileName), vfs.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = file.WriteAt([]byte("XX"), 40)
	_ = file.Close()
	if _, rec, err := Open(mem, root, Options{RefuseDamage: true, Storage: storage()}); !errors.Is(err, ErrDamaged) || !rec.Catalog.Damaged() {
		t.Fatalf("a damaged catalog: %v %+v", err, rec)
	}
	d, rec, err := Open(mem, root, Options{Storage: storage()})
	if err != nil || !rec.Catalog.Damaged() || rec.Catalog.Source != catalog.FileName+".prev" {
		t.Fatalf("falling back: %v %+v", err, rec)
	}
	_ = d.Close()
}
