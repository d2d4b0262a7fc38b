package consumer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// appendSubjects appends n records, record i with subject subjects(i).
func (r *rig) appendSubjects(n int, subjects func(i int) string) {
	r.t.Helper()
	var last segment.Ticket
	for i := range n {
		body, err := record.AppendBody(nil, record.Body{Subject: []byte(subjects(i)), Payload: []byte(fmt.Sprint(i))})
		if err != nil {
			r.t.Fatal(err)
		}
		if last, err = r.log.Append(context.Background(), body, record.Checksum(body)); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := last.Wait(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

// sparse: one record in ten is about orders.
func sparse(i int) string {
	if i%10 == 3 {
		return "orders.eu.fr"
	}
	return "billing.eu.x"
}

// checkCovers fails unless deliveries and gaps cover [0, n) once, the
// deliveries at the matching offsets, the gaps filtered and coalesced.
func checkCovers(t *testing.T, n int, deliveries []Delivery, gaps []Gap) {
	t.Helper()
	covered := make([]int, n)
	for _, d := range deliveries {
		if d.Offset%10 != 3 {
			t.Fatalf("offset %d delivered: its subject does not match", d.Offset)
		}
		covered[d.Offset]++
	}
	for i, g := range gaps {
		if g.Reason != GapFiltered || (i > 0 && gaps[i-1].To == g.From) {
			t.Fatalf("gaps %+v: want filtered and coalesced", gaps)
		}
		for o := g.From; o < g.To; o++ {
			covered[o]++
		}
	}
	for o, times := range covered {
		if times != 1 {
			t.Fatalf("offset %d accounted for %d times", o, times)
		}
	}
}

func TestFilteredWorkGroupSettlesSkippedRecords(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendSubjects(95, sparse)
	g := r.open("eu", Options{Filter: "orders.*.fr"})
	var deliveries []Delivery
	var gaps []Gap
	for {
		got, crossed, err := g.Fetch(1, 3, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 && len(crossed) == 0 {
			break
		}
		for _, d := range got {
			if g.Ack(d.Offset, d.Lease) != StatusOK {
				t.Fatalf("ack %d", d.Offset)
			}
		}
		deliveries, gaps = append(deliveries, got...), append(gaps, crossed...)
	}
	checkCovers(t, 95, deliveries, mergeGaps(gaps))
	if g.Committed() != 95 {
		t.Fatalf("cursor %d after acking every match, want 95", g.Committed())
	}
}

// mergeGaps joins gaps that touch across Fetch calls (each call
// coalesces its own).
func mergeGaps(gaps []Gap) []Gap {
	var out []Gap
	for _, g := range gaps {
		out = addGap(out, g)
	}
	return out
}

func TestFilterPersistsAndIsFixed(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendSubjects(20, sparse)
	g := r.open("eu", Options{Type: TypeBroadcast, Filter: "orders.>"})
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	again := r.open("eu", Options{Type: TypeBroadcast})
	if again.Filter() != "orders.>" {
		t.Fatalf("reopened with filter %q", again.Filter())
	}
	deliveries, gaps, err := again.Fetch(1, 100, 1<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkCovers(t, 20, deliveries, gaps)
	if _, err := Open(r.log, "eu", Options{Type: TypeBroadcast, Filter: "billing.>"}); !errors.Is(err, ErrFilterMismatch) {
		t.Fatalf("another filter: %v", err)
	}
	if _, err := Open(r.log, "bad", Options{Filter: "orders..x"}); !errors.Is(err, ErrInvalidFilter) {
		t.Fatalf("an invalid filter: %v", err)
	}
}

func TestStreamingReadFilter(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendSubjects(50, sparse)
	g := r.open("s", Options{Type: TypeStreaming})
	pattern, err := compileFilter("orders.eu.fr")
	if err != nil {
		t.Fatal(err)
	}
	deliveries, gaps, err := g.Read(0, 100, 1<<20, pattern)
	if err != nil {
		t.Fatal(err)
	}
	checkCovers(t, 50, deliveries, gaps)
	if all, _, _ := g.Read(0, 100, 1<<20, nil); len(all) != 50 {
		t.Fatalf("unfiltered read: %d records", len(all))
	}
}

func TestCheckpointFilter(t *testing.T) {
	st := sampleState()
	st.Filter = "orders.*.fr"
	got, err := decodeState(encodeState(nil, st))
	if err != nil || !reflect.DeepEqual(got, st) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	// Version 2 is version 3 without the filter: an older group has none.
	v2 := encodeState(nil, sampleState())
	v2 = append([]byte{checkpointV2}, v2[1:len(v2)-1]...)
	if got, err := decodeState(v2); err != nil || got.Filter != "" || !reflect.DeepEqual(got, sampleState()) {
		t.Fatalf("version 2: %+v %v", got, err)
	}
	bad := encodeState(nil, state{Type: TypeWork, Filter: "orders.x"})
	copy(bad[len(bad)-2:], "..")
	if _, err := decodeState(bad); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("an invalid stored filter: %v", err)
	}
}
