package loop

import (
	"errors"
	"runtime"
	"testing"

	"github.com/ironbus/ironbus/loop/uring"
	"golang.org/x/sys/unix"
)

func TestSlotTableGenerations(t *testing.T) {
	var table slotTable
	first, second := &uringConn{}, &uringConn{}
	slot, generation, ok := table.add(first)
	if !ok || table.lookup(slot, generation) != first {
		t.Fatal("a connection is not found under its own token")
	}
	table.remove(slot)
	if table.lookup(slot, generation) != nil || table.live != 0 {
		t.Fatal("a removed connection is still found")
	}
	reused, newGeneration, _ := table.add(second)
	if reused != slot || newGeneration == generation {
		t.Fatalf("slot %d generation %d after reuse of slot %d generation %d", reused, newGeneration, slot, generation)
	}
	if table.lookup(slot, generation) != nil || table.lookup(reused, newGeneration) != second {
		t.Fatal("a stale token reaches the slot's new owner")
	}
	if table.lookup(1000, 0) != nil {
		t.Fatal("a token naming no slot found a connection")
	}
}

// TestURingStaleCompletion: completions carrying the token of a slot's
// previous owner are ignored; the same completions with the current token
// act on the connection.
func TestURingStaleCompletion(t *testing.T) {
	if err := Available(BackendURing); err != nil {
		t.Skip(err)
	}
	runtime.LockOSThread() // this test asks for a single-issuer ring: one thread drives it
	defer runtime.UnlockOSThread()
	server := &URingServer{cfg: Config{}.withDefaults(), conns: newConnSet[*uringConn](),
		stopped: make(chan struct{}), acceptEnded: make(chan error, 1)}
	r := newURingReactor(server, 0)
	if err := r.open(uring.Options{SingleIssuer: true}); err != nil {
		t.Fatal(err)
	}
	previous := &uringConn{reactor: r, fd: -1, closed: true, released: true}
	previous.slot, previous.generation, _ = r.slots.add(previous)
	r.slots.remove(previous.slot)
	current := &uringConn{reactor: r, fd: -1, reading: true, recvArmed: true, sendArmed: true,
		sending: []outputChunk{{bytes: []byte("abc"), filled: 3}}, sendingBytes: 3,
		connFront: connFront{output: newOutputQueue(chunkSource{})}, in: newInputBuffer(server.cfg)}
	current.slot, current.generation, _ = r.slots.add(current)
	if current.slot != previous.slot {
		t.Fatalf("slot %d not reused (got %d)", previous.slot, current.slot)
	}

	reset := uring.CQE{UserData: previous.token(opRecv), Result: -int32(unix.ECONNRESET)}
	r.dispatch(reset)
	r.dispatch(uring.CQE{UserData: previous.token(opSend), Result: 3})
	if r.stale != 2 || !current.reading || !current.recvArmed || !current.sendArmed || current.sent != 0 {
		t.Fatalf("stale completions reached the new owner: stale %d, reading %v, recv %v, send %v, sent %d",
			r.stale, current.reading, current.recvArmed, current.sendArmed, current.sent)
	}
	current.sendArmed = false // the SEND above was never submitted
	reset.UserData = current.token(opRecv)
	r.dispatch(reset)
	if current.reading || current.recvArmed {
		t.Fatal("a current completion was ignored")
	}

	// Stop the reactor the way the server does: drain, then release.
	current.closed, current.released = true, true
	r.slots.remove(current.slot)
	r.halted.Store(true)
	r.loop()
	if r.inFlight() {
		t.Error("operations still in flight after the halt")
	}
	r.teardown()
}

// TestURingSetupFailureIsUnsupported: a reactor that cannot set its ring up
// makes the backend unsupported, so auto falls back.
func TestURingSetupFailureIsUnsupported(t *testing.T) {
	err := &unsupportedError{reason: "io_uring reactor 0 could not start: ENOMEM", cause: unix.ENOMEM}
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, unix.ENOMEM) {
		t.Fatal("the setup error lost ErrUnsupported or its cause")
	}
}

// TestURingReactorBudget keeps the RAM budget's line for an io_uring
// reactor at least what the reactor may hold.
func TestURingReactorBudget(t *testing.T) {
	rings := int64(uringSQEntries)*64 + int64(uringCQEntries)*16 + 4096
	need := int64(uringBufferBudget) + int64(uringBufferBudget) + rings
	if need > uringReactorBytes {
		t.Fatalf("an io_uring reactor may hold %d bytes; the budget counts %d", need, uringReactorBytes)
	}
	if got, _ := ReactorMemory(BackendURing, 64<<10); got != uringReactorBytes {
		t.Fatalf("ReactorMemory(uring) = %d", got)
	}
}
