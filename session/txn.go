package session

import (
	"errors"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/txn"
	"github.com/ironbus/ironbus/wire"
)

// Transactions on the wire (TxnBegin, the transaction publish option,
// TxnEnd): the engine's BeginTxn, AppendToTxn and EndTxn. A transaction
// belongs to the connection that began it; a connection that closes
// leaves its open transactions to their timeout.

// txnBegin answers a TxnBegin with the new transaction's id.
func (s *session) txnBegin(frame wire.Frame) error {
	m, err := wire.DecodeTxnBegin(frame.Body)
	if err != nil {
		return s.malformed(frame, err)
	}
	id, err := s.engine.BeginTxn(s.client.ID(), s.identityName(), time.Duration(m.TimeoutMs)*time.Millisecond)
	if err != nil {
		s.reply(frame.RequestID, txnWireError(err))
		return nil
	}
	s.send(wire.Append(nil, frame.RequestID, &wire.TxnState{ID: id, Outcome: wire.TxnOpen}))
	return nil
}

// txnEnd commits or aborts a transaction. Its group commits are checked
// like an Ack's commit (subscribe scope, the group rule). A commit waits
// for several fdatasyncs, so it runs off the reader; its answer goes out
// with the connection's other replies.
func (s *session) txnEnd(frame wire.Frame) error {
	m, err := wire.DecodeTxnEnd(frame.Body)
	if err != nil {
		return s.malformed(frame, err)
	}
	if m.Op != wire.TxnCommit && m.Op != wire.TxnAbort {
		s.reply(frame.RequestID, wire.NewError(wire.CodeInvalidRequest, "TxnEnd op %d is not one of commit (1), abort (2)", m.Op))
		return nil
	}
	commits := make([]broker.TxnGroupCommit, 0, len(m.GroupCommits))
	for _, c := range m.GroupCommits {
		if refused, err := s.refused(security.ScopeSubscribe, c.Stream, frame.RequestID); refused {
			return err
		}
		if s.groupRefused(security.GroupCommit, c.Stream, c.Group, frame.RequestID) {
			return nil
		}
		stream, group, err := s.readName(c.Stream, c.Group, frame.RequestID)
		if err != nil {
			return nil
		}
		commits = append(commits, broker.TxnGroupCommit{Stream: string(stream), Partition: c.Partition, Group: string(group), Offset: c.Offset})
	}
	owner, identity, id, commit := s.client.ID(), s.identityName(), m.ID, m.Op == wire.TxnCommit
	s.consumers.Add(1)
	go func() {
		defer s.consumers.Done()
		outcome, err := s.engine.EndTxn(owner, identity, id, commit, commits)
		if err != nil {
			s.out.frame(wire.Append(nil, frame.RequestID, s.hide(txnWireError(err))))
			return
		}
		s.out.frame(wire.Append(nil, frame.RequestID, s.txnState(id, outcome)))
	}()
	return nil
}

// txnState is the TxnState of an ended transaction, its streams named as
// this connection names them.
func (s *session) txnState(id uint64, outcome broker.TxnOutcome) *wire.TxnState {
	state := &wire.TxnState{ID: id, Outcome: wire.TxnAborted}
	if !outcome.Committed {
		return state
	}
	state.Outcome = wire.TxnCommitted
	for _, r := range outcome.Ranges[:min(len(outcome.Ranges), wire.MaxTxnRanges)] {
		name, ok := s.names.External(r.Stream)
		if !ok {
			name = r.Stream
		}
		state.Ranges = append(state.Ranges, wire.TxnRange{Stream: []byte(name), Partition: r.Partition, First: r.First, Count: r.Count})
	}
	return state
}

// produceTransactional adds a record published with the transaction
// option to its open transaction, after placement and permission checks.
// The producer option is accepted and not checked: a transaction, not the
// producer table, makes its records exactly-once, and their copies carry
// no producer id.
// It is answered, in order with the connection's other acks, by a
// ProduceAck flagged pending whose offset is the record's index in the
// transaction, once the record is durable in the coordinator log; it
// becomes visible in part only when the transaction commits.
func (s *session) produceTransactional(frame wire.Frame, p *wire.Produce, part *broker.Partition) (outcome, error) {
	silent := p.Flags&wire.ProduceNoAck != 0
	if !s.flushRun() {
		return outcomePaused, nil
	}
	if o := &p.Options; o.HasExpectLastOffset || o.HasExpectLastSubjectOffset || o.Batch {
		// Nothing could check an expectation against the partition now for
		// a record that reaches it at the commit, and a transaction is
		// already all or nothing.
		s.refuse(frame.RequestID, silent, wire.NewError(wire.CodeInvalidRequest,
			"a record of a transaction cannot carry an expectation or belong to an atomic batch; nothing was stored"))
		return outcomeDone, nil
	}
	if !s.out.credits.tryAcquire(1) {
		if s.out.credits.isBroken() {
			return outcomeDone, nil // the connection broke; nobody will read the answer
		}
		s.conn.PauseReading()
		s.out.credits.whenAvailable(1, s.conn.ResumeReading)
		return outcomePaused, nil
	}
	ticket, index, err := s.engine.AppendToTxn(s.client.ID(), p.Options.TransactionID, part, p.Body, p.BodyCRC)
	if err == broker.ErrFull { // returned unwrapped: the backpressure path
		s.out.credits.release(1)
		s.conn.PauseReading()
		go s.resumeWhen(s.engine.TxnRoomFor(len(p.Body)))
		return outcomePaused, nil
	}
	if err != nil {
		s.out.credits.release(1)
		s.refuse(frame.RequestID, silent, txnWireError(err))
		return outcomeDone, nil
	}
	answers := []recordAnswer{{silent: silent, kind: broker.Stored, offset: uint64(index), flags: wire.AckPending}}
	s.out.pushAcks(ticket, part.Index(), []uint32{frame.RequestID}, answers)
	return outcomeDone, nil
}

// identityName is the authenticated identity's name ("" without auth).
func (s *session) identityName() string {
	if s.identity == nil {
		return ""
	}
	return s.identity.Name
}

// txnWireError maps the engine's transaction errors to their codes.
func txnWireError(err error) *wire.Error {
	switch {
	case errors.Is(err, txn.ErrUnknown):
		return wire.NewError(wire.CodeTxnUnknown, "%v", err)
	case errors.Is(err, txn.ErrAborted):
		return wire.NewError(wire.CodeTxnAborted, "%v", err)
	}
	return wireError(err)
}
