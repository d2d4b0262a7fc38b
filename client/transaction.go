package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// Transaction errors. A failed transactional call returns an error that
// wraps one of them and the server's *wire.Error.
var (
	// ErrTxnAborted: the transaction was aborted (Abort, its timeout, a
	// record over its limits, or a broker restart before its commit);
	// none of its records will ever be seen.
	ErrTxnAborted = errors.New("ironbus client: transaction aborted")
	// ErrTxnUnknown: the broker has no open transaction with this id for
	// this connection (never begun, begun on another connection, or ended
	// and forgotten).
	ErrTxnUnknown = errors.New("ironbus client: unknown transaction")
	// ErrTxnCommitted: Abort found the transaction committed (its commit
	// had begun, and a commit only goes forward); all of it is visible.
	ErrTxnCommitted = errors.New("ironbus client: transaction committed")
)

// TxOptions configure a transaction.
type TxOptions struct {
	// Timeout aborts the transaction this long after it began unless it
	// ended first (0: the broker's default; the broker caps it).
	Timeout time.Duration
}

// TxRange is where a committed transaction's records on one partition
// went: Count records from offset First, in the order published.
type TxRange struct {
	Stream    string
	Partition uint32
	First     uint64
	Count     uint32
}

// Tx is an open transaction across streams and partitions. Records
// published in it are durable when Publish returns and invisible to every
// consumer until Commit; Commit makes all of them visible (each
// partition's part in one piece) together with the group commits added
// by CommitGroup, or, should it fail, none of them, also across a broker
// crash. The transaction belongs to the connection that began it. Safe
// for concurrent use.
type Tx struct {
	c  *Client
	id uint64

	mu      sync.Mutex
	commits []wire.TxnGroupCommit
}

// BeginTx opens a transaction on this connection.
func (c *Client) BeginTx(ctx context.Context, opts TxOptions) (*Tx, error) {
	timeout := max(opts.Timeout, 0).Milliseconds()
	state, err := c.txnCall(ctx, &wire.TxnBegin{TimeoutMs: uint32(min(timeout, 1<<32-1))})
	if err != nil {
		return nil, err
	}
	return &Tx{c: c, id: state.ID}, nil
}

// ID is the transaction's id on the broker.
func (tx *Tx) ID() uint64 { return tx.id }

// Publish stores record in the transaction for d and returns once it is
// durable in the transaction (not yet visible). The Ack's Partition is
// the partition it will go to and its Offset the record's index in the
// transaction; Commit says the offsets. An error that wraps ErrTxnAborted
// means the whole transaction is gone.
func (tx *Tx) Publish(ctx context.Context, d Destination, record Record) (Ack, error) {
	if err := tx.check(ctx); err != nil {
		return Ack{}, err
	}
	c := tx.c
	enc := c.encoders.Get().(*encoder)
	defer c.encoders.Put(enc)
	t, err := c.resolve(d, enc.stream)
	enc.stream = t.stream
	if err != nil {
		return Ack{}, err
	}
	if err := enc.encode(c, t, t.partition, &record, stamp{}); err != nil {
		return Ack{}, err
	}
	enc.msg.Options = wire.ProduceOptions{Transaction: true, TransactionID: tx.id}
	ack, err := c.produceEncoded(ctx, enc)
	enc.msg.Options = wire.ProduceOptions{}
	return ack, txnError(err)
}

// CommitGroup adds a streaming group's position to the commit: the
// group's next offset on a partition of stream (what Client.CommitOffset
// stores), applied atomically with the transaction's records. The last
// one added for a (stream, partition, group) counts.
func (tx *Tx) CommitGroup(stream string, partition uint32, group string, offset uint64) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	for i := range tx.commits {
		c := &tx.commits[i]
		if string(c.Stream) == stream && c.Partition == partition && string(c.Group) == group {
			c.Offset = offset
			return
		}
	}
	tx.commits = append(tx.commits, wire.TxnGroupCommit{Stream: []byte(stream), Partition: partition, Group: []byte(group), Offset: offset})
}

// Commit makes every record of the transaction visible and applies its
// group commits, and returns where the records went. Calling it again
// (or TxOutcome from another connection of the same identity) returns
// the same ranges and stores nothing twice. When it fails with anything
// but ErrTxnAborted (a broken connection, ctx), the commit may have
// happened: ask TxOutcome.
func (tx *Tx) Commit(ctx context.Context) ([]TxRange, error) {
	if err := tx.check(ctx); err != nil {
		return nil, err
	}
	tx.mu.Lock()
	if len(tx.commits) > wire.MaxTxnGroupCommits {
		tx.mu.Unlock()
		return nil, fmt.Errorf("%w: %d group commits in one transaction (maximum %d)", ErrInvalidArgument, len(tx.commits), wire.MaxTxnGroupCommits)
	}
	end := &wire.TxnEnd{ID: tx.id, Op: wire.TxnCommit, GroupCommits: append([]wire.TxnGroupCommit(nil), tx.commits...)}
	tx.mu.Unlock()
	return tx.c.endTx(ctx, end)
}

// Abort aborts the transaction: none of its records will be seen.
// Aborting an aborted transaction again is not an error; aborting one
// whose commit had begun is ErrTxnCommitted.
func (tx *Tx) Abort(ctx context.Context) error {
	if err := tx.check(ctx); err != nil {
		return err
	}
	state, err := tx.c.txnCall(ctx, &wire.TxnEnd{ID: tx.id, Op: wire.TxnAbort})
	if err == nil && state.Outcome == wire.TxnCommitted {
		return fmt.Errorf("%w: transaction %d", ErrTxnCommitted, tx.id)
	}
	return err
}

// check refuses a Tx that BeginTx did not return, and an ended ctx.
func (tx *Tx) check(ctx context.Context) error {
	if tx == nil || tx.c == nil {
		return fmt.Errorf("%w: a transaction not returned by BeginTx", ErrInvalidArgument)
	}
	return ctx.Err()
}

// TxOutcome asks for the outcome of transaction id, ended (or being
// ended) by a connection of the same identity: for a commit, its ranges;
// ErrTxnAborted; or ErrTxnUnknown when it did not commit (its owner's
// connection broke before the commit arrived: it aborts at its timeout).
// It is how a producer whose connection broke during Commit learns
// whether the commit happened, without committing anything twice. Never
// call it for an open transaction of this connection: that would commit
// it.
func (c *Client) TxOutcome(ctx context.Context, id uint64) ([]TxRange, error) {
	return c.endTx(ctx, &wire.TxnEnd{ID: id, Op: wire.TxnCommit})
}

func (c *Client) endTx(ctx context.Context, end *wire.TxnEnd) ([]TxRange, error) {
	state, err := c.txnCall(ctx, end)
	if err != nil {
		return nil, err
	}
	if state.Outcome != wire.TxnCommitted {
		return nil, fmt.Errorf("%w: transaction %d", ErrTxnAborted, end.ID)
	}
	ranges := make([]TxRange, 0, len(state.Ranges))
	for _, r := range state.Ranges {
		ranges = append(ranges, TxRange{Stream: string(r.Stream), Partition: r.Partition, First: r.First, Count: r.Count})
	}
	return ranges, nil
}

// txnCall sends a TxnBegin or TxnEnd and waits for its TxnState.
func (c *Client) txnCall(ctx context.Context, m wire.Message) (*wire.TxnState, error) {
	reply, err := c.request(ctx, m)
	if err != nil {
		return nil, txnError(err)
	}
	state, ok := reply.(*wire.TxnState)
	if !ok {
		return nil, fmt.Errorf("%w: a transaction request answered with %T", ErrProtocol, reply)
	}
	return state, nil
}

// onTxnState completes a TxnBegin or TxnEnd (sent as admin-kind calls:
// one request, one decoded answer). The ranges' names alias the read
// buffer, so they are copied.
func (c *Client) onTxnState(f wire.Frame) error {
	state, err := wire.DecodeTxnState(f.Body)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	for i := range state.Ranges {
		state.Ranges[i].Stream = append([]byte(nil), state.Ranges[i].Stream...)
	}
	e, ok, err := c.take(f, acceptsAdmin)
	if !ok {
		return err // nil for an abandoned request
	}
	e.call.admin = &state
	e.call.done <- struct{}{}
	return nil
}

// txnError wraps a server's transaction error with its sentinel.
func txnError(err error) error {
	var werr *wire.Error
	if !errors.As(err, &werr) {
		return err
	}
	switch werr.Code {
	case wire.CodeTxnAborted:
		return fmt.Errorf("%w: %w", ErrTxnAborted, err)
	case wire.CodeTxnUnknown:
		return fmt.Errorf("%w: %w", ErrTxnUnknown, err)
	}
	return err
}
