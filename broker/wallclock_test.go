package broker

import (
	"errors"
	"testing"
	"time"
)

// TestWallMarkRoundTrip: an encoded high-water decodes to itself, and any
// damage is refused with the typed error.
func TestWallMarkRoundTrip(t *testing.T) {
	image := encodeWallMark(testEpoch.UnixNano())
	got, err := decodeWallMark(image)
	if err != nil || got != testEpoch.UnixNano() {
		t.Fatalf("decoded %d, %v", got, err)
	}
	for i := range image {
		damaged := append([]byte(nil), image...)
		damaged[i] ^= 0x40
		if _, err := decodeWallMark(damaged); !errors.Is(err, ErrWallClockFile) {
			t.Fatalf("a flipped bit at byte %d was accepted (%v)", i, err)
		}
	}
	if _, err := decodeWallMark(image[:10]); !errors.Is(err, ErrWallClockFile) {
		t.Fatal("a torn file was accepted")
	}
}

// TestWallClockObserveSteps: drift within the threshold is not a step;
// beyond it either way is; the high-water never goes back and runs with
// the monotonic clock while the wall clock lags.
func TestWallClockObserveSteps(t *testing.T) {
	wall := &manualWall{now: testEpoch}
	w := &wallClock{clock: wall, threshold: time.Minute}
	if _, step := w.observe(0); step != nil {
		t.Fatal("the first reading without a persisted high-water was a step")
	}
	wall.advance(10*time.Second + 20*time.Second)
	if _, step := w.observe(10 * time.Second); step != nil {
		t.Fatal("20 s of drift was counted as a step")
	}
	wall.set(testEpoch.Add(-time.Hour))
	highWater, step := w.observe(20 * time.Second)
	if step == nil || step.By >= 0 {
		t.Fatalf("a step back an hour reported %+v", step)
	}
	if want := testEpoch.Add(40 * time.Second).UnixNano(); highWater < want {
		t.Fatalf("high-water %d went back below %d", highWater, want)
	}
	later, _ := w.observe(80 * time.Second)
	if later-highWater != int64(time.Minute) {
		t.Fatalf("with the wall clock behind, the high-water moved %v in a monotonic minute", time.Duration(later-highWater))
	}
}

// FuzzDecodeWallMark: no input panics the decoder; whatever it accepts
// re-encodes to the same bytes.
func FuzzDecodeWallMark(f *testing.F) {
	f.Add(encodeWallMark(testEpoch.UnixNano()))
	f.Add(encodeWallMark(-1))
	f.Add([]byte("IRONWALL"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		mark, err := decodeWallMark(data)
		if err != nil {
			if !errors.Is(err, ErrWallClockFile) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if string(encodeWallMark(mark)) != string(data) {
			t.Fatalf("accepted %x, which re-encodes differently", data)
		}
	})
}
