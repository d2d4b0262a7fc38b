package benchrig

import (
	"errors"
	"testing"
	"time"
)

// A stalled answer shows in the calls queued behind it: they count from
// when they fell due, not from when they could be sent.
func TestOpenLoopCountsFromTheIntendedTime(t *testing.T) {
	calls := 0
	latencies, err := OpenLoop(100, 200*time.Millisecond, func() error {
		calls++
		if calls == 5 {
			time.Sleep(55 * time.Millisecond) // five intervals and a half
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(latencies) != 20 {
		t.Fatalf("%d calls at 100/s for 200 ms, want 20", len(latencies))
	}
	if latencies[4] < 50*time.Millisecond {
		t.Fatalf("the stalled call took %v", latencies[4])
	}
	// The call due 10 ms after the stalled one was sent ~45 ms late.
	if latencies[5] < 35*time.Millisecond {
		t.Fatalf("the call queued behind the stall counts %v, want it to count from its due time", latencies[5])
	}
}

func TestOpenLoopStopsAtAnError(t *testing.T) {
	failure := errors.New("refused")
	if _, err := OpenLoop(1000, time.Second, func() error { return failure }); !errors.Is(err, failure) {
		t.Fatalf("OpenLoop returned %v", err)
	}
}
