package keyindex

import (
	"errors"
	"fmt"
	"path"
	"sync"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// TestBoundedByConfiguration publishes twenty times more distinct subjects
// than the maximum capacity: the table grows to its maximum and no
// further, the overlay never holds more than its two generations, and
// the subjects past the maximum get ErrFull, never a wrong answer. What
// is measured is the index's own structures, not the process's RSS.
func TestBoundedByConfiguration(t *testing.T) {
	mem := vfs.NewMemFS()
	l := &fakeLog{}
	opts := Options{Seed: 3, Capacity: 200, MaxCapacity: 1000, Overlay: 64, DroppedBits: 128}
	index := openReplayed(t, mem, l, opts)
	defer index.Close()
	for n := range 20_000 {
		l.putAll(index, fmt.Sprint("device-", n))
		if active, frozen := index.generations(); active > opts.Overlay || frozen > opts.Overlay {
			t.Fatalf("after %d subjects the overlay holds %d + %d entries, cap %d each", n+1, active, frozen, opts.Overlay)
		}
		if n%100 == 99 {
			l.durable = l.head()
			index.Durable(l.durable)
			if err := index.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	info, err := mem.Stat(path.Join(testDir, tableFileName))
	if err != nil || info.Size > tableSize(pagesFor(opts.MaxCapacity)) {
		t.Fatalf("table of %d bytes (%v); the maximum capacity needs %d", info.Size, err, tableSize(pagesFor(opts.MaxCapacity)))
	}
	if !index.isFull() {
		t.Fatal("the table is not full after 20 times its maximum")
	}
	held, full := 0, 0
	for n := range 20_000 {
		subject := fmt.Sprint("device-", n)
		got, found, err := index.Last([]byte(subject))
		switch {
		case errors.Is(err, ErrFull):
			full++
		case err != nil || !found || got != uint64(n):
			t.Fatalf("Last(%q) = %d, %v, %v; want %d", subject, got, found, err, n)
		default:
			held++
		}
	}
	if held < opts.Capacity || held > pagesForSlots(opts.MaxCapacity) {
		t.Fatalf("%d subjects held, %d ErrFull", held, full)
	}
}

// pagesForSlots is every slot of the largest table.
func pagesForSlots(capacity int) int { return int(pagesFor(capacity)) * slotsPerPage }

func (i *Index) generations() (active, frozen int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.mu.active.entries), len(i.mu.frozen.entries)
}

// TestConcurrentFlushes: Puts and Lasts on one goroutine (the append
// lock's), Durable and Flush on another (the flusher's), growth included:
// every answer is the oracle's or ErrFull. Run with -race.
func TestConcurrentFlushes(t *testing.T) {
	mem := vfs.NewMemFS()
	var mu sync.Mutex // guards l: the flusher reads it back
	l := &fakeLog{}
	opts := Options{Seed: 5, Capacity: 100, MaxCapacity: 5000, Overlay: 16,
		ReadLog: func(from, to uint64, visit func([]byte, uint64)) error {
			mu.Lock()
			defer mu.Unlock()
			return l.read(from, to, visit)
		}}
	index, err := Open(mem, testDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			mu.Lock()
			durable := l.durable
			mu.Unlock()
			index.Durable(durable)
			if err := index.Flush(); err != nil {
				done <- err
				return
			}
		}
	}()
	last := map[string]uint64{}
	for n := range 10_000 {
		subject := fmt.Sprint("k", n%3000)
		mu.Lock()
		offset := l.append(subject)
		if n%7 == 0 {
			l.durable = max(l.durable, l.head()-uint64(n%5))
		}
		mu.Unlock()
		index.Put([]byte(subject), offset)
		last[subject] = offset
		if n%3 == 0 {
			subject := fmt.Sprint("k", (n*7)%3000)
			want, exists := last[subject]
			got, found, err := index.Last([]byte(subject))
			if !errors.Is(err, ErrFull) && (err != nil || found != exists || found && got != want) {
				t.Fatalf("Last(%q) = %d, %v, %v; want %d, %v", subject, got, found, err, want, exists)
			}
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := index.Close(); err != nil {
		t.Fatal(err)
	}
}
