package histcheck

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

var (
	// ErrBadHistory: the history cannot be checked as given.
	ErrBadHistory = errors.New("histcheck: malformed history")
	// ErrViolation: the history breaks a property CheckLog checks.
	ErrViolation = errors.New("histcheck: history violates the log's guarantees")
	// ErrNotLinearizable: no linearization of the history exists.
	ErrNotLinearizable = errors.New("histcheck: history is not linearizable")
	// ErrUndecided: the linearizability search ran out of time.
	ErrUndecided = errors.New("histcheck: linearizability check timed out")
)

// Kind is what an operation does.
type Kind uint8

const (
	KindProduce Kind = iota + 1 // append one record carrying Value
	KindRead                    // read the record at Offset
)

// Outcome is how a produce ended.
type Outcome uint8

const (
	// OutcomePending: no answer was seen; checked as OutcomeInfo.
	OutcomePending Outcome = iota
	// OutcomeOK: acknowledged at Offset.
	OutcomeOK
	// OutcomeFail: definitely not written.
	OutcomeFail
	// OutcomeInfo: may or may not be written.
	OutcomeInfo
)

func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeFail:
		return "fail"
	case OutcomeInfo:
		return "info"
	default:
		return "pending"
	}
}

// Operation is one produce or read as a client saw it.
type Operation struct {
	Client    int
	Partition uint32
	Kind      Kind
	// Value is a produce's record, unique across the history, or the
	// record a read found.
	Value string
	// Offset is an OK produce's acknowledged offset, or the offset a read
	// asked for.
	Offset uint64
	// Found: a read found a record at Offset (false: the end of the log).
	Found bool
	// Outcome is a produce's; reads are recorded only when they answer.
	Outcome Outcome
	// Invoke and Return are the times the client sent the request and saw
	// its answer, on one clock for the whole history.
	Invoke, Return int64
}

func (o Operation) String() string {
	var b strings.Builder
	if o.Client == FinalClient {
		b.WriteString("final ")
	} else {
		fmt.Fprintf(&b, "client %d ", o.Client)
	}
	switch o.Kind {
	case KindProduce:
		fmt.Fprintf(&b, "produce p%d %q → %s", o.Partition, o.Value, o.Outcome)
		if o.Outcome == OutcomeOK {
			fmt.Fprintf(&b, " @%d", o.Offset)
		}
	case KindRead:
		fmt.Fprintf(&b, "read p%d @%d → ", o.Partition, o.Offset)
		if o.Found {
			fmt.Fprintf(&b, "%q", o.Value)
		} else {
			b.WriteString("end of log")
		}
	default:
		fmt.Fprintf(&b, "operation of kind %d", o.Kind)
	}
	if o.Kind == KindProduce && o.Outcome == OutcomePending {
		fmt.Fprintf(&b, " [t=%d..]", o.Invoke)
	} else {
		fmt.Fprintf(&b, " [t=%d..%d]", o.Invoke, o.Return)
	}
	return b.String()
}

// answered says whether the client saw the operation's answer.
func (o Operation) answered() bool {
	return o.Kind == KindRead || o.Outcome == OutcomeOK || o.Outcome == OutcomeFail
}

// indeterminate says whether a produce may or may not have happened.
func (o Operation) indeterminate() bool {
	return o.Kind == KindProduce && (o.Outcome == OutcomeInfo || o.Outcome == OutcomePending)
}

// Record is one record of a final read.
type Record struct {
	Offset uint64
	Value  string
}

// Partition is what is known of one partition's log besides the
// operations.
type Partition struct {
	// Begin is the partition's next offset when the history began (zero
	// for a new partition).
	Begin uint64
	// Start is the first offset the final read could reach (retention may
	// have removed what is below): Final[0].Offset in a correct log, and
	// the log's next offset when Final is empty.
	Start uint64
	// Final is the final read of the log, in the order it was read.
	Final []Record
}

// History is the input of the checkers.
type History struct {
	Operations []Operation
	// Partitions holds the final read of every partition an operation
	// touches.
	Partitions map[uint32]Partition
}

// validate refuses a history no checker can judge, and indexes its
// produces by value.
func (h History) validate() (map[string]int, error) {
	produces := make(map[string]int)
	for i, op := range h.Operations {
		if _, ok := h.Partitions[op.Partition]; !ok {
			return nil, fmt.Errorf("%w: partition %d has no final read (%s)", ErrBadHistory, op.Partition, op)
		}
		switch op.Kind {
		case KindProduce:
			if first, dup := produces[op.Value]; dup {
				return nil, fmt.Errorf("%w: value %q produced twice (%s; %s)", ErrBadHistory, op.Value,
					h.Operations[first], op)
			}
			produces[op.Value] = i
		case KindRead:
		default:
			return nil, fmt.Errorf("%w: operation %d has kind %d", ErrBadHistory, i, op.Kind)
		}
		if op.answered() && op.Return < op.Invoke {
			return nil, fmt.Errorf("%w: returns before it is invoked (%s)", ErrBadHistory, op)
		}
	}
	return produces, nil
}

// Recorder collects a history's operations as they happen; its methods
// may be called from many goroutines. Produce returns an id its outcome is
// recorded under.
type Recorder struct {
	mu         sync.Mutex
	operations []Operation
}

// Produce records a produce's invocation.
func (r *Recorder) Produce(client int, partition uint32, value string, at int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.operations = append(r.operations, Operation{Client: client, Partition: partition,
		Kind: KindProduce, Value: value, Invoke: at})
	return len(r.operations) - 1
}

// Acked records that the produce id was acknowledged at offset.
func (r *Recorder) Acked(id int, offset uint64, at int64) {
	r.finish(id, OutcomeOK, offset, at)
}

// Failed records that the produce id was definitely not written.
func (r *Recorder) Failed(id int, at int64) { r.finish(id, OutcomeFail, 0, at) }

// Indeterminate records that the produce id may or may not be written.
func (r *Recorder) Indeterminate(id int, at int64) { r.finish(id, OutcomeInfo, 0, at) }

func (r *Recorder) finish(id int, outcome Outcome, offset uint64, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op := &r.operations[id]
	op.Outcome, op.Offset, op.Return = outcome, offset, at
}

// Read records a read that answered: the record at offset is value, or
// there is none (found false).
func (r *Recorder) Read(client int, partition uint32, offset uint64, value string, found bool, invoke, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.operations = append(r.operations, Operation{Client: client, Partition: partition,
		Kind: KindRead, Offset: offset, Value: value, Found: found, Invoke: invoke, Return: ret})
}

// Operations returns a copy of the operations recorded so far.
func (r *Recorder) Operations() []Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Operation(nil), r.operations...)
}
