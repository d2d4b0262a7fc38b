package datadir

import (
	"errors"
	"testing"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/segment"
)

func TestSettleGroup(t *testing.T) {
	mem := seed(t)
	d, _ := openDir(t, mem, true)
	defer d.Close()
	orders := segment.LogID{Stream: "orders"}
	l, err := d.Log(orders)
	if err != nil {
		t.Fatal(err)
	}
	group, err := consumer.Open(l, "archive", consumer.Options{Type: consumer.TypeBroadcast})
	if err != nil {
		t.Fatal(err)
	}
	if err := group.Close(); err != nil {
		t.Fatal(err)
	}
	if summary, err := d.SettleGroup(orders, "archive", 2); err != nil || summary.Committed != 2 {
		t.Fatalf("settle to 2: %+v %v", summary, err)
	}
	if summary, err := d.SettleGroup(orders, "archive", 1); err != nil || summary.Committed != 2 {
		t.Fatalf("settling below the cursor moved it: %+v %v", summary, err)
	}
	if _, err := d.SettleGroup(orders, "archive", 4); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("past the end: %v", err)
	}
	if summary, err := d.SettleGroup(orders, "billing", 1); !errors.Is(err, ErrGroupType) || summary.Type != consumer.TypeWork {
		t.Fatalf("a work group: %+v %v", summary, err)
	}
	if _, err := d.SettleGroup(orders, "nobody", 1); !errors.Is(err, ErrNoSuchGroup) {
		t.Fatalf("no such group: %v", err)
	}
	if _, err := d.SettleGroup(segment.LogID{Stream: "orders", Partition: 9}, "archive", 1); !errors.Is(err, ErrNoSuchLog) {
		t.Fatalf("no such log: %v", err)
	}
	if summary, _, err := d.Group(orders, "archive"); err != nil || summary.Committed != 2 {
		t.Fatalf("the settled cursor is not in the checkpoint: %+v %v", summary, err)
	}
}
