package server

import (
	"errors"
	"testing"

	"github.com/ironbus/ironbus/broker"
)

// TestAnswersWaitingForACommitFailWithTheLeadership: an answer waiting for
// an offset to commit fails when this node stops leading (a new leader may
// cut the offset), and one asked after that fails at once.
func TestAnswersWaitingForACommitFailWithTheLeadership(t *testing.T) {
	p := &partitionReplica{stream: "s"}
	p.leading.Store(true)
	p.advance(5)
	if ticket := p.TicketFor(3); ticket.Err() != nil {
		t.Fatalf("an offset below the watermark: %v", ticket.Err())
	}
	waiting := p.TicketFor(7)
	select {
	case <-waiting.Done():
		t.Fatal("an offset above the watermark answered before its commit")
	default:
	}
	p.onLeading(false)
	<-waiting.Done()
	if !errors.Is(waiting.Err(), broker.ErrNoLeader) {
		t.Fatalf("after the leadership went: %v", waiting.Err())
	}
	if late := p.TicketFor(9); !errors.Is(late.Err(), broker.ErrNoLeader) {
		t.Fatalf("asked while not leading: %v", late.Err())
	}
}
