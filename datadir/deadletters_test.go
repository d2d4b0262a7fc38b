package datadir

import (
	"context"
	"errors"
	"testing"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

func TestDeadLetterQueues(t *testing.T) {
	mem := seed(t)
	queues, err := DeadLetterQueues(mem, root, nil)
	if err != nil || len(queues) != 1 || queues[0] != (DeadLetterQueue{Stream: "orders", First: 0, End: 2}) {
		t.Fatalf("queues %+v, %v", queues, err)
	}
	if _, err := DeadLetterQueues(vfs.NewMemFS(), root, nil); !errors.Is(err, segment.ErrNotFound) {
		t.Fatalf("no data directory: %v", err)
	}
}

// The seed's queue holds records that are not dead letters: a redrive
// skips them and moves its mark past them, durably.
func TestRedriveOffline(t *testing.T) {
	mem := seed(t)
	result, queue, err := Redrive(context.Background(), mem, root, "orders", 0, nil)
	if err != nil || result.Skipped != 2 || result.Republished != 0 || result.Mark != 2 || queue.End != 2 {
		t.Fatalf("redrive: %+v %+v %v", result, queue, err)
	}
	again, _, err := Redrive(context.Background(), mem, root, "orders", 0, nil)
	if err != nil || again.Skipped != 0 || again.Mark != 2 {
		t.Fatalf("a second redrive: %+v %v", again, err)
	}
	d, _ := openDir(t, mem, true)
	defer d.Close()
	if _, _, err := Redrive(context.Background(), mem, root, "orders", 0, nil); !errors.Is(err, segment.ErrLocked) {
		t.Fatalf("redrive beside a holder: %v", err)
	}
}

func TestRedriveWithoutQueues(t *testing.T) {
	mem := vfs.NewMemFS()
	d, _ := openDir(t, mem, true)
	_ = d.Close()
	if _, _, err := Redrive(context.Background(), mem, root, "orders", 0, nil); !errors.Is(err, ErrNoSuchLog) {
		t.Fatalf("no queues: %v", err)
	}
}
