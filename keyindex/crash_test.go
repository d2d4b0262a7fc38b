package keyindex

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/segment/vfs"
)

// crashWorkload publishes on a fake log whose durable mark trails its
// head, with flushes that write pages, grow the table (twice) and catch
// up left-out updates, until the file system dies. It returns the log as
// it stood at the cut.
func crashWorkload(fsys vfs.FS, seed uint64) *fakeLog {
	l := &fakeLog{}
	rng := rand.New(rand.NewPCG(seed, 3))
	index, err := Open(fsys, testDir, Options{Seed: 9, Capacity: 95, MaxCapacity: 400, Overlay: 24,
		CoverStep: 8, ReadLog: l.read})
	if err != nil {
		return l
	}
	for step := range 60 {
		for range 1 + rng.IntN(40) {
			subject := ""
			if rng.IntN(8) > 0 {
				subject = fmt.Sprint("subject-", rng.IntN(30+6*step))
			}
			l.putAll(index, subject)
		}
		// The log syncs up to a point short of its head, now and then: the
		// rest is its torn tail if the power goes now. Meanwhile the
		// overlay fills and Puts are left out.
		if rng.IntN(3) == 0 {
			l.durable += uint64(rng.IntN(int(l.head()-l.durable) + 1))
			index.Durable(l.durable)
		}
		if err := index.Flush(); err != nil {
			return l
		}
	}
	l.durable = l.head()
	index.Durable(l.durable)
	_ = index.Close()
	return l
}

// TestCrashAtEveryWrite cuts the power at each mutating file operation
// of the workload in turn (table creation, page writes, syncs, header
// writes, the growth's file, rename and directory sync) and recovers the
// image: with only synced state, and with unsynced writes kept at random,
// reordered and one torn. After recovery (the table plus a replay of the
// log from CoversUpTo), every subject's last offset equals the one the
// durable log gives, and no subject names a record of the torn tail: its
// offsets then go to other subjects.
func TestCrashAtEveryWrite(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { crashAtEveryWrite(t, seed) })
	}
}

func crashAtEveryWrite(t *testing.T, seed uint64) {
	for k := int64(0); ; k++ {
		mem := vfs.NewMemFS()
		cut := crashtest.CutAtWrite(mem, k, vfs.CrashOptions{},
			vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: 0.5, Reorder: true, Tear: true})
		l := crashWorkload(cut.FS(), seed)
		if !cut.Cut() {
			if k < 50 || l.reads == 0 {
				t.Fatalf("the workload made only %d writes and read the log back %d times", k, l.reads)
			}
			t.Logf("cut at each of %d writes", k)
			return
		}
		for n, image := range cut.Images() {
			log := &fakeLog{subjects: append([][]byte(nil), l.subjects...), durable: l.durable, ever: l.ever}
			log.crash()
			index := openReplayed(t, image, log, Options{CoverStep: 8})
			checkAgainst(t, index, log, log.durable, false)
			log.putAll(index, "subject-1", "after-the-crash", "subject-2")
			checkAgainst(t, index, log, log.head(), false)
			if err := index.Close(); err != nil {
				t.Fatalf("cut at write %d, image %d: close: %v", k, n, err)
			}
		}
	}
}
