package broker

import (
	"errors"
	"fmt"
	"io"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/txn"
)

// Transactions across streams and partitions (package txn): records of an
// open transaction are durable in the coordinator log <data-dir>/txn and
// invisible; a commit copies them into their partitions. The engine is
// the coordinator's Sink: it appends the copies, scans partitions for
// them at recovery, and moves streaming groups' positions.

// txnDirName is the coordinator's directory under the data directory.
const txnDirName = "txn"

// TransactionConfig bounds transactions; zero values take package txn's
// defaults.
type TransactionConfig struct {
	// MaxOpen bounds the open transactions (txn.DefaultMaxOpen): a
	// TxnBegin over it is ErrBusy, retryable.
	MaxOpen int
	// MaxRecords and MaxBytes bound one transaction (txn.DefaultMaxRecords,
	// txn.DefaultMaxBytes of bodies): a record over them aborts it.
	MaxRecords int
	MaxBytes   int64
	// DefaultTimeout applies when TxnBegin asks for none; MaxTimeout caps
	// what it may ask for.
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
}

// TxnRange is where a committed transaction's records on one partition
// went.
type TxnRange = txn.Range

// TxnGroupCommit is a streaming group's position committed with a
// transaction.
type TxnGroupCommit = txn.GroupCommit

// TxnOutcome is how a transaction ended.
type TxnOutcome = txn.Outcome

// txnStore opens the coordinator lazily, as the dead-letter store does
// its logs: a broker that never ran a transaction has no txn directory.
type txnStore struct {
	mu          sync.Mutex
	coordinator atomic.Pointer[txn.Coordinator]
	closed      bool
}

// openTransactions recovers the transactions of an existing coordinator
// log at boot; every stream is open by then, so a commit cut short is
// rolled forward into its partitions before anyone is served.
func (b *Broker) openTransactions() {
	if _, err := b.cfg.FS.Stat(path.Join(b.cfg.DataDir, txnDirName)); err != nil {
		return // none yet: the first BeginTxn creates it
	}
	if _, err := b.transactions(); err != nil {
		// The broker starts anyway (I3): the streams serve, and every
		// BeginTxn tries the coordinator again (and says why it fails).
		b.cfg.Logger.Error("transaction log did not open; transactions are unavailable until it does", "error", err.Error())
	}
}

// transactions returns the coordinator, opening (and recovering) it on
// first use.
func (b *Broker) transactions() (*txn.Coordinator, error) {
	store := &b.txns
	if coordinator := store.coordinator.Load(); coordinator != nil {
		return coordinator, nil
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if coordinator := store.coordinator.Load(); coordinator != nil {
		return coordinator, nil
	}
	if store.closed {
		return nil, fmt.Errorf("%w: transactions are closed", ErrShuttingDown)
	}
	tc := b.cfg.Transactions
	coordinator, err := txn.Open(txn.Config{FS: b.cfg.FS, Dir: path.Join(b.cfg.DataDir, txnDirName), Storage: b.cfg.Storage,
		Sink: engineSink{b}, Clock: b.clock.Now, MaxOpen: tc.MaxOpen, MaxRecords: tc.MaxRecords, MaxBytes: tc.MaxBytes,
		DefaultTimeout: tc.DefaultTimeout, MaxTimeout: tc.MaxTimeout, Logger: b.cfg.Logger})
	if err != nil {
		return nil, storageError(fmt.Errorf("broker: transactions: %w", err))
	}
	store.coordinator.Store(coordinator)
	return coordinator, nil
}

// close closes the coordinator, if it was opened.
func (s *txnStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if coordinator := s.coordinator.Load(); coordinator != nil {
		return coordinator.Close()
	}
	return nil
}

// BeginTxn opens a transaction owned by connection owner (authenticated
// as identity, "" for none) that aborts after timeout (0: the default).
// Too many open is ErrBusy (retryable).
func (b *Broker) BeginTxn(owner uint64, identity string, timeout time.Duration) (uint64, error) {
	coordinator, err := b.transactions()
	if err != nil {
		return 0, err
	}
	id, err := coordinator.Begin(owner, identity, timeout)
	if errors.Is(err, segment.ErrFull) {
		return 0, &RetryableError{Err: fmt.Errorf("%w: the transaction log is busy: %w", ErrBusy, err), RetryAfter: txnBusyRetry}
	}
	return id, txnError(err)
}

// txnBusyRetry is the hint sent when the coordinator cannot take a
// transaction now.
const txnBusyRetry = 100 * time.Millisecond

// AppendToTxn adds a record for partition to owner's open transaction id.
// The ticket completes when the record is durable in the coordinator log
// (it stays invisible until the commit); index is its place in the
// transaction. Errors wrap txn.ErrUnknown (not open, or another
// connection's) or txn.ErrAborted (its timeout passed, or this record
// was over its limits and aborted it). It never blocks: ErrFull
// (unwrapped) means the coordinator log's staging buffer is full and
// nothing changed; wait on TxnRoomFor and try again.
func (b *Broker) AppendToTxn(owner, id uint64, partition *Partition, body []byte, bodyCRC uint32) (Ticket, uint32, error) {
	if len(body)+txn.ReframedGrowth > int(b.cfg.Storage.MaxRecordBytes) {
		return Ticket{}, 0, fmt.Errorf("%w: a transactional record of %d bytes leaves no room for its reference header (maximum %d)",
			ErrRecordTooLarge, len(body), int(b.cfg.Storage.MaxRecordBytes)-txn.ReframedGrowth)
	}
	coordinator := b.txns.coordinator.Load()
	if coordinator == nil {
		return Ticket{}, 0, fmt.Errorf("%w: %d (no transaction was begun since the broker started)", txn.ErrUnknown, id)
	}
	target := txn.Target{Stream: partition.stream, Partition: partition.index}
	ticket, index, err := coordinator.Append(owner, id, target, body, bodyCRC)
	if err != nil {
		return Ticket{}, 0, txnError(err)
	}
	return Ticket{ticket}, index, nil
}

// EndTxn commits (commit) or aborts owner's transaction id. A commit
// makes every record visible in its partition and applies groupCommits,
// all or none, also across a crash; it returns once all of it is
// durable. Ending an ended transaction again from a connection of the
// same identity returns its outcome and changes nothing.
func (b *Broker) EndTxn(owner uint64, identity string, id uint64, commit bool, groupCommits []TxnGroupCommit) (TxnOutcome, error) {
	coordinator := b.txns.coordinator.Load()
	if coordinator == nil {
		return TxnOutcome{}, fmt.Errorf("%w: %d (no transaction was begun since the broker started)", txn.ErrUnknown, id)
	}
	outcome, err := coordinator.End(owner, identity, id, commit, groupCommits)
	return outcome, txnError(err)
}

// TxnRoomFor returns a channel closed once the coordinator log has room
// for a record body of bodyBytes (when to retry after ErrFull).
func (b *Broker) TxnRoomFor(bodyBytes int) <-chan struct{} {
	coordinator := b.txns.coordinator.Load()
	if coordinator == nil {
		ready := make(chan struct{})
		close(ready)
		return ready
	}
	return coordinator.RoomFor(bodyBytes)
}

// OpenTxns lists the open transactions, for the operator.
func (b *Broker) OpenTxns() []txn.Info {
	coordinator := b.txns.coordinator.Load()
	if coordinator == nil {
		return nil
	}
	return coordinator.OpenTransactions()
}

// txnError gives the coordinator's errors an engine kind where one fits;
// ErrUnknown and ErrAborted stay as they are (adapters map them).
func txnError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, txn.ErrTooManyOpen), errors.Is(err, txn.ErrCommitting):
		return &RetryableError{Err: fmt.Errorf("%w: %w", ErrBusy, err), RetryAfter: txnBusyRetry}
	case errors.Is(err, txn.ErrClosed):
		return fmt.Errorf("%w: %w", ErrShuttingDown, err)
	case errors.Is(err, txn.ErrUnknown), errors.Is(err, txn.ErrAborted), hasKind(err):
		return err
	}
	return storageError(err)
}

// engineSink is the engine as the coordinator's Sink.
type engineSink struct{ b *Broker }

func (s engineSink) partition(t txn.Target) (*Partition, error) {
	served, ok := s.b.existingStream(t.Stream)
	if !ok {
		return nil, fmt.Errorf("%w: %w %q", txn.ErrTargetGone, ErrNoSuchStream, t.Stream)
	}
	p, err := served.Partition(t.Partition)
	if errors.Is(err, ErrNoSuchPartition) {
		return nil, fmt.Errorf("%w: %w", txn.ErrTargetGone, err)
	}
	return p, err
}

func (s engineSink) Head(t txn.Target) (uint64, error) {
	p, err := s.partition(t)
	if err != nil {
		return 0, err
	}
	return p.log.Committed(), nil
}

// Append stores the copies through the checked path (with no check but
// their subjects), so the partition's subject index sees them, and waits
// until they are durable.
func (s engineSink) Append(t txn.Target, bodies [][]byte, crcs []uint32) (uint64, error) {
	p, err := s.partition(t)
	if err != nil {
		return 0, err
	}
	run := &CheckedRun{Bodies: bodies, CRCs: crcs}
	for _, body := range bodies {
		subject, _ := record.Subject(body)
		run.Checks = append(run.Checks, Check{Subject: subject})
		run.FrameBytes += record.FrameSize(len(body))
	}
	for {
		ticket, err := p.TryAppendChecked(run)
		if err == ErrFull {
			select {
			case <-p.RoomFor(run.FrameBytes):
				continue
			case <-s.b.stop:
				return 0, ErrShuttingDown
			}
		}
		if err != nil {
			return 0, err
		}
		<-ticket.Done()
		if err := ticket.Err(); err != nil {
			return 0, err
		}
		return ticket.First, nil
	}
}

func (s engineSink) Scan(t txn.Target, from uint64, fn func(uint64, []byte)) error {
	p, err := s.partition(t)
	if err != nil {
		return err
	}
	r := p.log.NewReader(max(from, p.log.FirstOffset()))
	defer r.Close()
	for {
		entry, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return storageError(err)
		}
		if entry.Gap == nil {
			fn(entry.Offset, entry.Body)
		}
	}
}

func (s engineSink) CheckGroups(commits []txn.GroupCommit) error {
	for _, c := range commits {
		served, err := s.b.OpenGroup([]byte(c.Stream), c.Partition, []byte(c.Group), GroupSpec{Type: consumer.TypeStreaming})
		if err != nil {
			return err
		}
		if end := served.Log().Committed(); c.Offset > end {
			return fmt.Errorf("%w: group %q of stream %q partition %d: offset %d is past the partition's end %d",
				ErrInvalidArgument, c.Group, c.Stream, c.Partition, c.Offset, end)
		}
	}
	return nil
}

func (s engineSink) ApplyGroups(commits []txn.GroupCommit) error {
	for _, c := range commits {
		served, err := s.b.OpenGroup([]byte(c.Stream), c.Partition, []byte(c.Group), GroupSpec{Type: consumer.TypeStreaming})
		if errors.Is(err, ErrNoSuchStream) || errors.Is(err, ErrNoSuchPartition) {
			s.b.cfg.Logger.Warn("group commit of a transaction dropped: its stream is gone", "stream", c.Stream, "group", c.Group)
			continue
		}
		if err != nil {
			return err
		}
		if err := served.Consumer().Commit(c.Offset); err != nil {
			return consumerError(err)
		}
		if err := served.Consumer().Checkpoint(); err != nil {
			return consumerError(err)
		}
	}
	return nil
}
