package histcheck

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// FinalClient is the client number of the reads CheckLinearizable adds for
// the final read of a log.
const FinalClient = -1

// step is one operation as the model sees it. Each produce owns one offset
// (values are unique), so the log's state is only its next offset: a
// produce applies when the log ends where it owns, and a read that finds
// a record is right when that record's produce owns the offset read and
// the log reaches past it.
type step struct {
	produce bool
	offset  uint64
	found   bool
	// owned: a found read's value is owned at offset by a produce of this
	// partition that did not fail.
	owned bool
}

var logModel = porcupine.Model{
	Init: func() any { return uint64(0) },
	Step: func(state, input, _ any) (bool, any) {
		next, s := state.(uint64), input.(step)
		switch {
		case s.produce:
			return next == s.offset, next + 1
		case s.found:
			return s.owned && s.offset < next, next
		default:
			return s.offset >= next, next
		}
	},
	Hash: func(state any) uint64 { return state.(uint64) },
}

// CheckLinearizable searches each partition's history for a
// linearization (see the package comment). timeout bounds each
// partition's search (zero: no bound). It returns nil, ErrBadHistory,
// ErrUndecided, or Violations matching ErrNotLinearizable.
func CheckLinearizable(h History, timeout time.Duration) error {
	produces, err := h.validate()
	if err != nil {
		return err
	}
	byPartition := make(map[uint32][]Operation)
	for _, op := range h.Operations {
		byPartition[op.Partition] = append(byPartition[op.Partition], op)
	}
	var vs Violations
	var undecided []uint32
	for _, p := range slices.Sorted(maps.Keys(h.Partitions)) {
		c := linearChecker{partition: p, log: h.Partitions[p], operations: byPartition[p],
			all: h.Operations, produces: produces}
		found, decided := c.check(timeout)
		vs = append(vs, found...)
		if !decided {
			undecided = append(undecided, p)
		}
	}
	switch {
	case len(vs) > 0:
		return vs
	case len(undecided) > 0:
		return fmt.Errorf("%w: partitions %v", ErrUndecided, undecided)
	}
	return nil
}

// linearChecker checks one partition.
type linearChecker struct {
	partition  uint32
	log        Partition
	operations []Operation
	all        []Operation
	produces   map[string]int

	owner      map[uint64]Operation // offset → the produce that owns it
	ownedAt    map[string]uint64    // value → the offset its produce owns
	violations Violations
}

func (c *linearChecker) check(timeout time.Duration) (Violations, bool) {
	c.placeProduces()
	if len(c.violations) > 0 {
		return c.violations, true
	}
	ops := c.modelOperations()
	model := logModel
	begin := c.log.Begin
	model.Init = func() any { return begin }
	result, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	switch result {
	case porcupine.Ok:
		return nil, true
	case porcupine.Illegal:
		c.explain(ops, info)
		return c.violations, true
	default:
		return nil, false
	}
}

// placeProduces gives each produce its offset: the acknowledged one, or
// for an indeterminate produce where its value was first seen (the final
// log, else a read). An indeterminate produce never seen is left out.
func (c *linearChecker) placeProduces() {
	seen := make(map[string]uint64)
	for i := len(c.operations) - 1; i >= 0; i-- {
		if op := c.operations[i]; op.Kind == KindRead && op.Found {
			seen[op.Value] = op.Offset // the first read in history order wins
		}
	}
	for i := len(c.log.Final) - 1; i >= 0; i-- {
		seen[c.log.Final[i].Value] = c.log.Final[i].Offset // the final log wins over reads
	}
	c.owner = make(map[uint64]Operation)
	c.ownedAt = make(map[string]uint64)
	for _, op := range c.operations {
		if op.Kind != KindProduce || op.Outcome == OutcomeFail {
			continue
		}
		offset := op.Offset
		if op.indeterminate() {
			at, ok := seen[op.Value]
			if !ok {
				continue
			}
			offset = at
		}
		if other, taken := c.owner[offset]; taken {
			c.violations = append(c.violations, Violation{Kind: Conflict, Partition: c.partition,
				Offset: offset, Detail: "two produces own one offset (acknowledged or seen there)",
				Operations: []Operation{other, op}})
			continue
		}
		c.owner[offset] = op
		c.ownedAt[op.Value] = offset
	}
}

// modelOperations turns the partition's operations, and its final read,
// into porcupine operations whose Metadata is the Operation shown in a
// report.
func (c *linearChecker) modelOperations() []porcupine.Operation {
	var ops []porcupine.Operation
	var end int64
	for _, op := range c.operations {
		end = max(end, op.Invoke, op.Return)
	}
	end++
	for _, offset := range slices.Sorted(maps.Keys(c.owner)) {
		op := c.owner[offset]
		ret := op.Return
		if op.indeterminate() {
			ret = math.MaxInt64 // it may take effect at any time after it began
		}
		ops = append(ops, porcupine.Operation{ClientId: max(op.Client, 0), Input: step{produce: true, offset: offset},
			Call: op.Invoke, Return: ret, Metadata: op})
	}
	for _, op := range c.operations {
		if op.Kind == KindRead {
			ops = append(ops, c.read(op, op.Invoke, op.Return))
		}
	}
	// The final read comes after everything, one offset at a time: as
	// one instant it would let the search try every subset of its reads
	// before finding that one of them fails.
	next := c.log.Start
	at := make(map[uint64]string, len(c.log.Final))
	for _, r := range c.log.Final {
		if _, dup := at[r.Offset]; !dup {
			at[r.Offset] = r.Value
		}
		next = max(next, r.Offset+1)
	}
	finalRead := func(offset uint64, value string, found bool) {
		final := Operation{Client: FinalClient, Partition: c.partition, Kind: KindRead, Offset: offset,
			Value: value, Found: found, Invoke: end, Return: end}
		ops = append(ops, c.read(final, end, end))
		end++
	}
	for offset := c.log.Start; offset <= next; offset++ {
		value, found := at[offset]
		finalRead(offset, value, found)
	}
	// A record listed again at an offset already read: it must be owned
	// there too, and cannot be.
	for _, r := range c.log.Final {
		if at[r.Offset] != r.Value {
			finalRead(r.Offset, r.Value, true)
		}
	}
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int {
		return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.Return, b.Return))
	})
	for i := range ops {
		ops[i].Metadata = tagged{index: i, operation: ops[i].Metadata.(Operation)}
	}
	return ops
}

func (c *linearChecker) read(op Operation, invoke, ret int64) porcupine.Operation {
	s := step{offset: op.Offset, found: op.Found}
	if op.Found {
		at, ok := c.ownedAt[op.Value]
		s.owned = ok && at == op.Offset
	}
	return porcupine.Operation{ClientId: max(op.Client, 0), Input: s, Call: invoke, Return: ret, Metadata: op}
}

// explain reports a failed search: the longest linearizable prefix found
// and the operations that cannot follow it, earliest return first.
func (c *linearChecker) explain(ops []porcupine.Operation, info porcupine.LinearizationInfo) {
	var longest []porcupine.Operation
	for _, partition := range info.PartialLinearizationsOperations() {
		for _, prefix := range partition {
			if len(prefix) > len(longest) {
				longest = prefix
			}
		}
	}
	inPrefix := make(map[int]bool)
	for _, op := range longest {
		inPrefix[op.Metadata.(tagged).index] = true
	}
	var stuck []porcupine.Operation
	for _, op := range ops {
		if !inPrefix[op.Metadata.(tagged).index] {
			stuck = append(stuck, op)
		}
	}
	slices.SortStableFunc(stuck, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
	detail := fmt.Sprintf("the longest linearizable prefix holds %d of %d operations", len(longest), len(ops))
	var shown []Operation
	if len(longest) > 0 {
		detail += "; it ends with the first operation below, and the others cannot follow it"
		shown = append(shown, longest[len(longest)-1].Metadata.(tagged).operation)
	} else {
		detail += "; none of the operations below can come first"
	}
	for i, op := range stuck {
		if i == 4 {
			break
		}
		shown = append(shown, op.Metadata.(tagged).operation)
	}
	var offset uint64
	if len(stuck) > 0 {
		offset = stuck[0].Input.(step).offset
	}
	c.violations = append(c.violations, Violation{Kind: NotLinearizable, Partition: c.partition,
		Offset: offset, Detail: detail, Operations: shown})
}

// tagged is a porcupine operation's Metadata: its place in the history
// given to porcupine and the operation a report shows.
type tagged struct {
	index     int
	operation Operation
}
