package arena_test

import (
	"os"
	"testing"

	"github.com/ironbus/ironbus/arena"
)

func TestReadRSSIsPlausible(t *testing.T) {
	rss, err := arena.ReadRSS()
	if err != nil {
		t.Fatalf("ReadRSS: %v", err)
	}
	// A Go test binary is resident for at least a megabyte and, on a
	// machine this test runs on, far less than a terabyte.
	if rss < 1<<20 || rss > 1<<40 {
		t.Errorf("ReadRSS = %s, implausible", arena.FormatBytes(rss))
	}
	if anonymous, err := arena.ReadAnonymous(); err == nil && (anonymous <= 0 || anonymous > rss) {
		t.Errorf("ReadAnonymous = %s with RSS %s", arena.FormatBytes(anonymous), arena.FormatBytes(rss))
	}
}

// An off-heap slab costs no resident memory until its pages are touched,
// then exactly its size; Close gives it back. This is the measurement the
// budget stands for.
func TestOffHeapSlabShowsInRSS(t *testing.T) {
	const size = 64 << 20
	read := arena.ReadAnonymous
	if _, err := read(); err != nil {
		read = arena.ReadRSS // kernels before 4.5 have no RssAnon
	}
	slab, err := arena.NewSlab(arena.NewBudget(), "rss test", "", 1<<20, size>>20, true)
	if err != nil {
		t.Fatal(err)
	}
	before := mustRead(t, read)
	var held []arena.Buffer
	page := os.Getpagesize()
	for {
		buffer, ok := slab.Get()
		if !ok {
			break
		}
		bytes := buffer.Bytes()
		for offset := 0; offset < len(bytes); offset += page {
			bytes[offset] = 1
		}
		held = append(held, buffer)
	}
	touched := mustRead(t, read)
	if grown := touched - before; grown < size*3/4 {
		t.Errorf("touching %s off-heap grew resident memory by only %s (%s → %s)",
			arena.FormatBytes(size), arena.FormatBytes(grown), arena.FormatBytes(before), arena.FormatBytes(touched))
	}
	for _, buffer := range held {
		if err := buffer.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if err := slab.Close(); err != nil {
		t.Fatal(err)
	}
	closed := mustRead(t, read)
	if shrunk := touched - closed; shrunk < size*3/4 {
		t.Errorf("Close gave back only %s of %s (%s → %s)",
			arena.FormatBytes(shrunk), arena.FormatBytes(size), arena.FormatBytes(touched), arena.FormatBytes(closed))
	}
	t.Logf("resident: %s before, %s touched, %s after Close",
		arena.FormatBytes(before), arena.FormatBytes(touched), arena.FormatBytes(closed))
}

func mustRead(t *testing.T, read func() (int64, error)) int64 {
	t.Helper()
	value, err := read()
	if err != nil {
		t.Fatal(err)
	}
	return value
}

// TestReadAnonymousOfMatchesSelf: reading this process by pid agrees with
// reading it through /proc/self.
func TestReadAnonymousOfMatchesSelf(t *testing.T) {
	self, err := arena.ReadAnonymous()
	if err != nil {
		t.Skip(err)
	}
	byPid, err := arena.ReadAnonymousOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if byPid < self/2 || byPid > self*2 {
		t.Fatalf("RssAnon %d by pid, %d through /proc/self", byPid, self)
	}
	if _, err := arena.ReadAnonymousOf(-1); err == nil {
		t.Fatal("a process that does not exist has memory")
	}
}
