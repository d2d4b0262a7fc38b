package datadir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

const root = "/data"

func storage() segment.Options {
	return segment.Options{SegmentSize: segment.MinSegmentSize, StagingBytes: 16 << 10}
}

func openDir(t *testing.T, fsys vfs.FS, exclusive bool) (*Dir, Recovery) {
	t.Helper()
	d, rec, err := Open(fsys, root, Options{Exclusive: exclusive, Storage: storage()})
	if err != nil {
		t.Fatalf("open (exclusive %v): %v", exclusive, err)
	}
	return d, rec
}

func appendRecords(t *testing.T, l *segment.Log, n int) {
	t.Helper()
	for i := range n {
		body := []byte(fmt.Sprintf("record %d of %s", i, l.ID()))
		ticket, err := l.Append(context.Background(), body, crc(body))
		if err == nil {
			err = ticket.Wait(context.Background())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// seed builds the directory every sweep starts from: stream orders (two
// partitions with records, a group, a binding, a dead-letter queue) and
// stream audit beside it.
func seed(t *testing.T) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMemFS()
	d, _ := openDir(t, mem, true)
	for _, s := range []catalog.Stream{{Name: "orders", Partitions: 2, MaxRecords: 100}, {Name: "audit", Partitions: 1}} {
		if _, err := d.CreateStream(s); err != nil {
			t.Fatal(err)
		}
	}
	for p := range uint32(2) {
		l, err := d.Log(segment.LogID{Stream: "orders", Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		appendRecords(t, l, 3+int(p))
	}
	orders0, _ := d.Log(segment.LogID{Stream: "orders"})
	group, err := consumer.Open(orders0, "billing", consumer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := group.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Bind("orders.>", "orders"); err != nil {
		t.Fatal(err)
	}
	if err := d.Bind("audit.*", "audit"); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	letters, err := segment.Open(mem, path.Join(root, DeadLetterDirName), storage())
	if err != nil {
		t.Fatal(err)
	}
	queue, err := letters.OpenLog(segment.LogID{Stream: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	appendRecords(t, queue, 2)
	if err := letters.Close(); err != nil {
		t.Fatal(err)
	}
	return mem
}

// observe opens the directory (shared, then exclusive, which finishes
// what a crash left) and renders everything a stream is made of; a
// leftover after the exclusive open, or a shared view that differs from
// the exclusive one, fails the test.
func observe(t *testing.T, mem *vfs.MemFS) string {
	t.Helper()
	shared := render(t, mem, false)
	state := render(t, mem, true)
	if shared != state {
		t.Fatalf("a shared open saw\n%s\nan exclusive one\n%s", shared, state)
	}
	for _, dir := range []string{path.Join(root, streamsDirName), path.Join(root, DeadLetterDirName, streamsDirName)} {
		names, _ := mem.List(dir)
		for _, name := range names {
			if strings.HasPrefix(name, removedPrefix) {
				t.Fatalf("leftover %s/%s after an exclusive open", dir, name)
			}
		}
	}
	if _, err := mem.Stat(path.Join(root, catalog.FileName+tempSuffix)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("leftover temporary catalog: %v", err)
	}
	return state
}

func render(t *testing.T, mem *vfs.MemFS, exclusive bool) string {
	t.Helper()
	d, _ := openDir(t, mem, exclusive)
	defer d.Close()
	var out strings.Builder
	c := d.Catalog()
	for _, s := range c.Streams {
		state := d.Describe(s)
		fmt.Fprintf(&out, "stream %s %d partitions max records %d: %v, %d groups\n", s.Name, s.Partitions, s.MaxRecords, state.Partitions, state.Groups)
		for p := range s.Partitions {
			summaries, _, err := d.Groups(segment.LogID{Stream: s.Name, Partition: p})
			if err != nil && !errors.Is(err, ErrNoSuchLog) {
				t.Fatal(err)
			}
			for _, g := range summaries {
				fmt.Fprintf(&out, "  group %d/%s at %d\n", p, g.Name, g.Committed)
			}
		}
	}
	for _, b := range c.Bindings {
		fmt.Fprintf(&out, "binding %s -> %s\n", b.Pattern, b.Stream)
	}
	ids, err := d.Logs()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, ok := c.Stream(id.Stream); !ok {
			fmt.Fprintf(&out, "log %s outside the catalog\n", id)
		}
	}
	letters, err := segment.Open(mem, path.Join(root, DeadLetterDirName), segment.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer letters.Close()
	queues, _ := letters.Logs()
	for _, id := range queues {
		if _, ok := c.Stream(id.Stream); !ok {
			// A shared open reads a queue left by an unfinished removal as
			// gone; an exclusive open must have deleted it.
			if exclusive {
				t.Fatalf("leftover dead-letter queue of %s after an exclusive open", id.Stream)
			}
			continue
		}
		l, err := letters.OpenLog(id)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "dead letters of %s: %d..%d\n", id.Stream, l.FirstOffset(), l.Committed())
	}
	return out.String()
}

// sweep cuts power at every mutating file-system operation of change,
// in turn, and asserts that the directory reopens as it was before the
// change or as it is after it, with nothing left over.
func sweep(t *testing.T, change func(*Dir) error) {
	base := seed(t)
	before := observe(t, base.CrashClone(vfs.CrashOptions{}))
	complete := base.CrashClone(vfs.CrashOptions{})
	{
		d, _ := openDir(t, complete, true)
		if err := change(d); err != nil {
			t.Fatal(err)
		}
		_ = d.Close()
	}
	after := observe(t, complete)
	if before == after {
		t.Fatalf("the change changed nothing:\n%s", before)
	}
	sawBefore, sawAfter := false, false
	for cut := int64(0); ; cut++ {
		var options []vfs.CrashOptions
		for seed := range uint64(3) {
			keep := float64(seed) / 2
			options = append(options, vfs.CrashOptions{Seed: seed, KeepUnsynced: keep, Reorder: keep > 0, Tear: keep > 0})
		}
		power := crashtest.CutAtWrite(base.CrashClone(vfs.CrashOptions{}), cut, options...)
		if d, _, err := Open(power.FS(), root, Options{Exclusive: true, Storage: storage()}); err == nil {
			_ = change(d)
			_ = d.Close()
		}
		images := power.Images()
		if len(images) == 0 {
			if cut < 5 {
				t.Fatalf("only %d mutations", cut)
			}
			if !sawBefore || !sawAfter {
				t.Fatalf("the sweep never saw both outcomes (before %v, after %v)", sawBefore, sawAfter)
			}
			t.Logf("%d cuts", cut)
			return
		}
		for i, image := range images {
			switch got := observe(t, image); got {
			case before:
				sawBefore = true
			case after:
				sawAfter = true
			default:
				t.Fatalf("cut %d image %d: half a change:\n%s\nbefore:\n%s\nafter:\n%s", cut, i, got, before, after)
			}
		}
	}
}

func TestCrashDuringCreate(t *testing.T) {
	sweep(t, func(d *Dir) error {
		_, err := d.CreateStream(catalog.Stream{Name: "fresh", Partitions: 3, MaxAge: time.Hour})
		return err
	})
}

func TestCrashDuringRemove(t *testing.T) {
	sweep(t, func(d *Dir) error { return d.RemoveStream("orders") })
}

func TestCrashDuringBind(t *testing.T) {
	sweep(t, func(d *Dir) error { return d.Bind("audit.x.>", "audit") })
}

func TestCrashDuringUnbind(t *testing.T) {
	sweep(t, func(d *Dir) error { return d.Unbind("orders.>") })
}

func TestCrashDuringGroupReset(t *testing.T) {
	sweep(t, func(d *Dir) error {
		_, _, err := d.ResetGroup(segment.LogID{Stream: "orders"}, "billing", consumer.StartPosition{Kind: consumer.StartOffset, Offset: 2})
		return err
	})
}

func TestCrashDuringGroupRemove(t *testing.T) {
	sweep(t, func(d *Dir) error {
		_, _, err := d.RemoveGroup(segment.LogID{Stream: "orders"}, "billing")
		return err
	})
}
