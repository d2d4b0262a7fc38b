package datadir

import (
	"errors"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/segment"
)

func TestRead(t *testing.T) {
	mem := seed(t)
	var bodies []string
	summary, err := Read(mem, root, segment.LogID{Stream: "orders", Partition: 1}, 1, 2, nil, nil, func(entry segment.Entry) error {
		bodies = append(bodies, string(entry.Body))
		return nil
	})
	if err != nil || summary != (ReadSummary{Records: 2, First: 0, End: 4}) {
		t.Fatalf("read: %+v %v", summary, err)
	}
	if len(bodies) != 2 || !strings.HasPrefix(bodies[0], "record 1 of") {
		t.Fatalf("bodies %q", bodies)
	}
	stop := errors.New("stop")
	if _, err := Read(mem, root, segment.LogID{Stream: "orders"}, 0, 0, nil, nil, func(segment.Entry) error { return stop }); err != stop {
		t.Fatalf("visit's error is not returned as it is: %v", err)
	}
	if _, err := Read(mem, root, segment.LogID{Stream: "orders", Partition: 7}, 0, 0, nil, nil, nil); !errors.Is(err, ErrNoSuchLog) {
		t.Fatalf("a missing log: %v", err)
	}
	d, _ := openDir(t, mem, true)
	defer d.Close()
	if _, err := Read(mem, root, segment.LogID{Stream: "orders"}, 0, 0, nil, nil, nil); !errors.Is(err, segment.ErrLocked) {
		t.Fatalf("beside a holder: %v", err)
	}
}
