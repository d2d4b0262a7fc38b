package segment

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestExternalTicketCompletesOnce(t *testing.T) {
	ticket, complete := ExternalTicket(10, 3)
	var calls atomic.Int32
	ticket.OnDone(func() { calls.Add(1) })
	select {
	case <-ticket.Done():
		t.Fatal("done before complete")
	default:
	}
	failure := errors.New("not committed")
	complete(failure)
	complete(nil)
	<-ticket.Done()
	if !errors.Is(ticket.Err(), failure) {
		t.Fatalf("Err = %v", ticket.Err())
	}
	ticket.OnDone(func() { calls.Add(1) })
	if calls.Load() != 2 {
		t.Fatalf("callbacks ran %d times, want 2", calls.Load())
	}
	ok, done := ExternalTicket(0, 1)
	done(nil)
	if ok.Err() != nil || ok.First != 0 || ok.Count != 1 {
		t.Fatalf("committed ticket: %+v %v", ok, ok.Err())
	}
}
