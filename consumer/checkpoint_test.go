package consumer

import (
	"errors"
	"reflect"
	"testing"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

func sampleState() state {
	return state{Type: TypeKeyShared, Start: StartPosition{Kind: StartTime, Time: -5}, Committed: 100,
		Done:   []Span{{From: 102, To: 105}, {From: 200, To: 1 << 40}},
		Counts: []deliveryCount{{Offset: 100, Deliveries: 3}, {Offset: 101, Deliveries: 1}, {Offset: 106, Deliveries: 5}},
		Moves:  []moveIntent{{Offset: 101, DeadLetterEnd: 7, Attempts: 5, Reason: ReasonMaxDeliver}}}
}

func TestCheckpointRoundTrip(t *testing.T) {
	for _, st := range []state{sampleState(), {Type: TypeWork}, {Type: TypeStreaming, Committed: 1<<64 - 1}} {
		got, err := decodeState(encodeState(nil, st))
		if err != nil {
			t.Fatalf("decode %+v: %v", st, err)
		}
		normalize(&got)
		normalize(&st)
		if !reflect.DeepEqual(got, st) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, st)
		}
	}
}

// normalize makes empty lists comparable whether nil or not.
func normalize(st *state) {
	if len(st.Done) == 0 {
		st.Done = nil
	}
	if len(st.Counts) == 0 {
		st.Counts = nil
	}
	if len(st.Moves) == 0 {
		st.Moves = nil
	}
}

func TestCheckpointReadsVersionOne(t *testing.T) {
	st, err := decodeState([]byte{1, 42, 0, 0, 0, 0, 0, 0, 0})
	if err != nil || st.Type != TypeWork || st.Committed != 42 {
		t.Fatalf("version 1: %+v %v", st, err)
	}
}

func TestCheckpointDecodeErrorsAreTyped(t *testing.T) {
	good := encodeState(nil, sampleState())
	cases := map[string]struct {
		data []byte
		want error
	}{
		"empty":       {nil, ErrCorruptCheckpoint},
		"newer":       {append([]byte{9}, good[1:]...), ErrCheckpointTooNew},
		"version 0":   {append([]byte{0}, good[1:]...), ErrCorruptCheckpoint},
		"short v1":    {[]byte{1, 2, 3}, ErrCorruptCheckpoint},
		"truncated":   {good[:len(good)-3], ErrCorruptCheckpoint},
		"trailing":    {append(append([]byte(nil), good...), 0), ErrCorruptCheckpoint},
		"bad type":    {append([]byte{2, 9}, good[2:]...), ErrCorruptCheckpoint},
		"huge list":   {append(append([]byte(nil), good[:27]...), 0xff, 0xff, 0xff, 0xff, 0x0f), ErrCorruptCheckpoint},
		"header only": {good[:20], ErrCorruptCheckpoint},
	}
	for name, c := range cases {
		if _, err := decodeState(c.data); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
}

// FuzzDecodeState: the decoder never panics or allocates beyond its
// input, and whatever it accepts encodes back to the same state.
func FuzzDecodeState(f *testing.F) {
	f.Add(encodeState(nil, sampleState()))
	f.Add(encodeState(nil, state{Type: TypeBroadcast, Committed: 9}))
	f.Add([]byte{1, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{2})
	f.Add(encodeState(nil, state{Type: TypeWork, Committed: 3, Filter: "orders.*.eu.>"}))
	f.Add([]byte{3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 'a', '.', '>'})
	f.Add([]byte{3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0x03})
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeState(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) && !errors.Is(err, ErrCheckpointTooNew) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := decodeState(encodeState(nil, st))
		if err != nil {
			t.Fatalf("re-encoded state fails: %v (%+v)", err, st)
		}
		normalize(&st)
		normalize(&again)
		if !reflect.DeepEqual(st, again) {
			t.Fatalf("re-encoding changed the state:\n%+v\n%+v", st, again)
		}
	})
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestCreateInBackground: with CreateInBackground, Open writes nothing;
// the caller's next Checkpoint writes the new group and closes Created.
// A group found on disk is created already.
func TestCreateInBackground(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(5, nil)
	g := r.open("late", Options{Type: TypeStreaming, Start: StartPosition{Kind: StartLatest}, CreateInBackground: true})
	if isClosed(g.Created()) {
		t.Fatal("Created before any checkpoint")
	}
	if _, err := r.log.ReadCheckpoint(checkpointPrefix + "late"); !errors.Is(err, segment.ErrNotFound) {
		t.Fatalf("Open wrote the checkpoint itself: %v", err)
	}
	if err := g.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if !isClosed(g.Created()) {
		t.Fatal("Created still open after the checkpoint")
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	again := r.open("late", Options{Type: TypeStreaming, CreateInBackground: true})
	if !isClosed(again.Created()) || again.Committed() != 5 {
		t.Fatalf("reopened: created %v, committed %d; want created, at the latest offset 5 of creation",
			isClosed(again.Created()), again.Committed())
	}
}

// TestNoCheckpointAfterCloseOrDelete: a checkpoint that comes late, after
// the group was closed or deleted, writes nothing (a deleted group stays
// deleted), and releases whoever waits on Created.
func TestNoCheckpointAfterCloseOrDelete(t *testing.T) {
	r := mustRig(t, vfs.NewMemFS())
	r.appendRecords(3, nil)
	deleted := r.open("gone", Options{CreateInBackground: true})
	if err := deleted.Delete(); err != nil {
		t.Fatal(err)
	}
	if !isClosed(deleted.Created()) {
		t.Fatal("a deleted group leaves Created open")
	}
	if err := deleted.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.log.ReadCheckpoint(checkpointPrefix + "gone"); !errors.Is(err, segment.ErrNotFound) {
		t.Fatalf("a checkpoint after Delete brought the group back: %v", err)
	}
	closed := r.open("shut", Options{CreateInBackground: true})
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if !isClosed(closed.Created()) {
		t.Fatal("a closed group leaves Created open")
	}
	if _, err := r.log.ReadCheckpoint(checkpointPrefix + "shut"); err != nil {
		t.Fatalf("Close did not write the new group: %v", err)
	}
}
