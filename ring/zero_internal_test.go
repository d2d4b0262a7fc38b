package ring

import "testing"

// These tests look inside the rings: a popped slot must hold the zero
// value, or the ring would keep whatever the value points to alive until a
// producer laps it.

func TestSPSCZeroesPoppedSlots(t *testing.T) {
	ring := NewSPSC[*int](4)
	values := []int{0, 1, 2, 3, 4}
	for index := range 3 {
		ring.TryPush(&values[index])
	}
	if value, ok := ring.TryPop(); !ok || value != &values[0] || ring.slots[0] != nil {
		t.Fatalf("TryPop = (%p, %v), slot 0 = %p, want slot 0 nil", value, ok, ring.slots[0])
	}
	for index := 3; index < 5; index++ {
		if !ring.TryPush(&values[index]) { // wraps: positions 3, 4 use slots 3, 0
			t.Fatalf("push %d refused", index)
		}
	}
	// One batch covering both runs of the wrap.
	if got := ring.PopBatch(make([]*int, 0, 8)); len(got) != 4 || got[0] != &values[1] || got[3] != &values[4] {
		t.Fatalf("PopBatch returned %d values", len(got))
	}
	for index, slot := range ring.slots {
		if slot != nil {
			t.Errorf("slot %d still holds %p after drain", index, slot)
		}
	}
}

func TestMPSCZeroesPoppedSlots(t *testing.T) {
	ring := NewMPSC[*int](4)
	values := []int{0, 1, 2, 3, 4}
	for index := range 3 {
		ring.TryPush(&values[index])
	}
	if value, ok := ring.TryPop(); !ok || value != &values[0] || ring.slots[0].value != nil {
		t.Fatalf("TryPop = (%p, %v), slot 0 = %p, want slot 0 nil", value, ok, ring.slots[0].value)
	}
	for index := 3; index < 5; index++ {
		if !ring.TryPush(&values[index]) {
			t.Fatalf("push %d refused", index)
		}
	}
	if got := ring.PopBatch(make([]*int, 0, 8)); len(got) != 4 || got[0] != &values[1] || got[3] != &values[4] {
		t.Fatalf("PopBatch returned %d values", len(got))
	}
	for index := range ring.slots {
		if slot := ring.slots[index].value; slot != nil {
			t.Errorf("slot %d still holds %p after drain", index, slot)
		}
	}
}
