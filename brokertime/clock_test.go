package brokertime

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// manualSource is a monotonic source moved by hand.
type manualSource struct{ elapsed atomic.Int64 }

func (s *manualSource) Elapsed() time.Duration  { return time.Duration(s.elapsed.Load()) }
func (s *manualSource) advance(d time.Duration) { s.elapsed.Add(int64(d)) }

func openClock(t *testing.T, fsys vfs.FS, source Source) *Clock {
	t.Helper()
	if err := vfs.MkdirAllDurable(fsys, "data"); err != nil {
		t.Fatal(err)
	}
	c, err := Open(fsys, "data", Options{Source: source, PersistEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClockFollowsItsSourceOnly(t *testing.T) {
	source := &manualSource{}
	source.advance(5 * time.Hour) // the source's origin is arbitrary
	c := openClock(t, vfs.NewMemFS(), source)
	defer c.Close()
	if now := c.Now(); now != 0 {
		t.Fatalf("a fresh clock starts at %v, want 0", now)
	}
	source.advance(90 * time.Second)
	if now := c.Now(); now != 90*time.Second {
		t.Fatalf("Now = %v, want 90s", now)
	}
}

func TestClockNeverGoesBackwards(t *testing.T) {
	source := &manualSource{}
	c := openClock(t, vfs.NewMemFS(), source)
	defer c.Close()
	source.advance(time.Minute)
	before := c.Now()
	source.advance(-30 * time.Second) // a broken source
	if now := c.Now(); now < before {
		t.Fatalf("Now went back from %v to %v", before, now)
	}
}

func TestRestartContinuesFromTheFloor(t *testing.T) {
	fsys := vfs.NewMemFS()
	source := &manualSource{}
	c := openClock(t, fsys, source)
	source.advance(10 * time.Minute)
	last := c.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// The machine is off for a week (a new boot: the source restarts).
	c = openClock(t, fsys, &manualSource{})
	defer c.Close()
	if now := c.Now(); now != last {
		t.Fatalf("after a clean restart Now = %v; want %v, where the last run stopped", now, last)
	}
}

func TestCrashRestartNeverRepeatsATime(t *testing.T) {
	mem := vfs.NewMemFS()
	if err := vfs.MkdirAllDurable(mem, "data"); err != nil {
		t.Fatal(err)
	}
	source := &manualSource{}
	c, err := Open(mem, "data", Options{Source: source, PersistEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	source.advance(3 * time.Second)
	if err := c.Persist(); err != nil {
		t.Fatal(err)
	}
	source.advance(900 * time.Millisecond) // handed out, not yet persisted
	handedOut := c.Now()
	image := mem.CrashClone(vfs.CrashOptions{})
	_ = c.Close()
	after, err := Open(image, "data", Options{Source: &manualSource{}, PersistEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if now := after.Now(); now <= handedOut {
		t.Fatalf("after a crash Now = %v, not past %v handed out before it", now, handedOut)
	}
}

func TestDamagedFloorStartsFromZero(t *testing.T) {
	fsys := vfs.NewMemFS()
	if err := fsys.MkdirAll("data"); err != nil {
		t.Fatal(err)
	}
	image := encodeFloor(time.Hour, false)
	image[17] ^= 1
	if err := vfs.WriteFileAtomic(fsys, "data/"+FileName, image); err != nil {
		t.Fatal(err)
	}
	c := openClock(t, fsys, &manualSource{})
	defer c.Close()
	if now := c.Now(); now != 0 {
		t.Fatalf("Now = %v from a damaged floor, want 0", now)
	}
}

func TestFloorCodec(t *testing.T) {
	for _, clean := range []bool{false, true} {
		floor, gotClean, err := decodeFloor(encodeFloor(42*time.Second, clean))
		if err != nil || floor != 42*time.Second || gotClean != clean {
			t.Fatalf("round trip: %v, %v, %v", floor, gotClean, err)
		}
	}
	for _, bad := range [][]byte{nil, make([]byte, fileSize), encodeFloor(1, false)[:fileSize-1]} {
		if _, _, err := decodeFloor(bad); err == nil {
			t.Errorf("decoded %x", bad)
		}
	}
}

func TestSystemSourceMovesForward(t *testing.T) {
	source := SystemSource()
	before := source.Elapsed()
	time.Sleep(2 * time.Millisecond)
	if r, ok := source.(refresher); ok {
		r.refresh()
	}
	if after := source.Elapsed(); after-before < 2*time.Millisecond {
		t.Fatalf("the system source moved %v over a 2ms sleep", after-before)
	}
}
