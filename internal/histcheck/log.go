package histcheck

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ViolationKind names the property a Violation breaks.
type ViolationKind uint8

const (
	// LostAck: an acknowledged record is missing from the final log.
	LostAck ViolationKind = iota + 1
	// MovedAck: an acknowledged record is in the final log at another
	// offset than its acknowledgement said.
	MovedAck
	// DoubleAck: two produces were acknowledged at one offset.
	DoubleAck
	// Duplicate: a value appears more than once in the final log.
	Duplicate
	// Gap: the final log skips offsets.
	Gap
	// Disorder: the final log's offsets repeat or go backwards.
	Disorder
	// Phantom: a record was read that was never produced in its partition.
	Phantom
	// FailedVisible: a produce that failed was read.
	FailedVisible
	// ReadMismatch: a read saw another record than the final log holds at
	// its offset.
	ReadMismatch
	// RealTimeOrder: an operation's offset is at or below one known to be
	// filled before the operation began (an ack or a find of an offset
	// that was already taken, or a read that finds nothing where a record
	// was already known to be).
	RealTimeOrder
	// FutureRead: a read returned a record whose produce began after the
	// read ended.
	FutureRead
	// Conflict: two produces own one offset once the indeterminate ones
	// are placed where they were seen (CheckLinearizable).
	Conflict
	// NotLinearizable: the search found no linearization
	// (CheckLinearizable).
	NotLinearizable
)

var violationNames = map[ViolationKind]string{
	LostAck: "lost ack", MovedAck: "moved ack", DoubleAck: "double ack", Duplicate: "duplicate",
	Gap: "gap", Disorder: "disorder", Phantom: "phantom record", FailedVisible: "failed produce visible",
	ReadMismatch: "read mismatch", RealTimeOrder: "real-time order", FutureRead: "read from the future",
	Conflict: "offset conflict", NotLinearizable: "not linearizable",
}

func (k ViolationKind) String() string {
	if name, ok := violationNames[k]; ok {
		return name
	}
	return fmt.Sprintf("violation %d", k)
}

// Violation is one broken property, with the operations that show it.
type Violation struct {
	Kind       ViolationKind
	Partition  uint32
	Offset     uint64
	Detail     string
	Operations []Operation
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: p%d @%d: %s", v.Kind, v.Partition, v.Offset, v.Detail)
	for _, op := range v.Operations {
		fmt.Fprintf(&b, "\n\t%s", op)
	}
	return b.String()
}

// Violations is the error the checkers return; errors.Is matches
// ErrViolation, or ErrNotLinearizable when one is a failed linearization
// or an offset conflict.
type Violations []Violation

// maxReported bounds the violations an error message spells out.
const maxReported = 20

func (vs Violations) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d violation(s):", len(vs))
	for i, v := range vs {
		if i == maxReported {
			fmt.Fprintf(&b, "\nand %d more", len(vs)-maxReported)
			break
		}
		fmt.Fprintf(&b, "\n%s", v)
	}
	return b.String()
}

// Is matches the sentinel of the checker that found the violations.
func (vs Violations) Is(target error) bool {
	for _, v := range vs {
		linear := v.Kind == Conflict || v.Kind == NotLinearizable
		if (target == ErrNotLinearizable && linear) || (target == ErrViolation && !linear) {
			return true
		}
	}
	return false
}

// Has says whether any violation is of kind.
func (vs Violations) Has(kind ViolationKind) bool {
	return slices.ContainsFunc(vs, func(v Violation) bool { return v.Kind == kind })
}

// CheckLog checks the history against the final read of every partition
// and against real time (see the package comment). It returns nil,
// ErrBadHistory, or Violations.
func CheckLog(h History) error {
	produces, err := h.validate()
	if err != nil {
		return err
	}
	byPartition := make(map[uint32][]Operation)
	for _, op := range h.Operations {
		byPartition[op.Partition] = append(byPartition[op.Partition], op)
	}
	var vs Violations
	for _, p := range slices.Sorted(maps.Keys(h.Partitions)) {
		c := logChecker{partition: p, log: h.Partitions[p], operations: byPartition[p],
			all: h.Operations, produces: produces}
		vs = append(vs, c.check()...)
	}
	if len(vs) > 0 {
		return vs
	}
	return nil
}

// logChecker checks one partition.
type logChecker struct {
	partition  uint32
	log        Partition
	operations []Operation // this partition's
	all        []Operation
	produces   map[string]int // value → index in all

	at         map[uint64]string   // final log: offset → first value there
	offsetsOf  map[string][]uint64 // final log: value → offsets
	violations Violations
}

func (c *logChecker) report(kind ViolationKind, offset uint64, detail string, ops ...Operation) {
	c.violations = append(c.violations, Violation{Kind: kind, Partition: c.partition, Offset: offset,
		Detail: detail, Operations: ops})
}

func (c *logChecker) check() Violations {
	c.checkFinalOrder()
	for _, r := range c.log.Final {
		if len(c.offsetsOf[r.Value]) > 1 && c.offsetsOf[r.Value][0] == r.Offset {
			c.report(Duplicate, r.Offset, fmt.Sprintf("%q is in the final log at offsets %v", r.Value,
				c.offsetsOf[r.Value]), c.producerOf(r.Value)...)
		}
		c.checkProduced(r.Value, r.Offset, "the final log holds")
	}
	c.checkAcks()
	c.checkReads()
	c.checkRealTime()
	return c.violations
}

// checkFinalOrder checks that the final read is dense from Start and
// increasing, and indexes it.
func (c *logChecker) checkFinalOrder() {
	c.at = make(map[uint64]string, len(c.log.Final))
	c.offsetsOf = make(map[string][]uint64, len(c.log.Final))
	next := c.log.Start
	for i, r := range c.log.Final {
		switch {
		case r.Offset > next:
			c.report(Gap, next, fmt.Sprintf("the final log skips offsets %d..%d (record %d is at %d)",
				next, r.Offset-1, i, r.Offset))
		case r.Offset < next:
			c.report(Disorder, r.Offset, fmt.Sprintf("record %d of the final log is at %d, expected %d",
				i, r.Offset, next))
		}
		next = max(next, r.Offset+1)
		if _, seen := c.at[r.Offset]; !seen {
			c.at[r.Offset] = r.Value
		}
		c.offsetsOf[r.Value] = append(c.offsetsOf[r.Value], r.Offset)
	}
}

func (c *logChecker) producerOf(value string) []Operation {
	if i, ok := c.produces[value]; ok {
		return []Operation{c.all[i]}
	}
	return nil
}

// checkProduced checks that a value seen at offset was produced in this
// partition by a produce that did not fail.
func (c *logChecker) checkProduced(value string, offset uint64, seenBy string, witness ...Operation) {
	i, ok := c.produces[value]
	switch {
	case !ok:
		c.report(Phantom, offset, fmt.Sprintf("%s %q, which was never produced", seenBy, value), witness...)
	case c.all[i].Partition != c.partition:
		c.report(Phantom, offset, fmt.Sprintf("%s %q, which was produced to p%d", seenBy, value,
			c.all[i].Partition), append(witness, c.all[i])...)
	case c.all[i].Outcome == OutcomeFail:
		c.report(FailedVisible, offset, fmt.Sprintf("%s %q, whose produce failed", seenBy, value),
			append(witness, c.all[i])...)
	}
}

// checkAcks checks that every acknowledged record is in the final log at
// its offset, and that no two share one.
func (c *logChecker) checkAcks() {
	ackedAt := make(map[uint64]Operation)
	for _, op := range c.operations {
		if op.Kind != KindProduce || op.Outcome != OutcomeOK {
			continue
		}
		if other, dup := ackedAt[op.Offset]; dup {
			c.report(DoubleAck, op.Offset, "two produces acknowledged at one offset", other, op)
		}
		ackedAt[op.Offset] = op
		if op.Offset < c.log.Start {
			continue // removed by retention before the final read
		}
		offsets := c.offsetsOf[op.Value]
		switch {
		case len(offsets) == 0:
			detail := "acknowledged, missing from the final log"
			if holder, ok := c.at[op.Offset]; ok {
				detail += fmt.Sprintf(" (its offset holds %q)", holder)
			}
			c.report(LostAck, op.Offset, detail, op)
		case !slices.Contains(offsets, op.Offset):
			c.report(MovedAck, op.Offset, fmt.Sprintf("acknowledged at %d, in the final log at %v",
				op.Offset, offsets), op)
		}
	}
}

// checkReads checks every read that found a record against the final log
// and against its produce's invocation.
func (c *logChecker) checkReads() {
	for _, op := range c.operations {
		if op.Kind != KindRead || !op.Found {
			continue
		}
		c.checkProduced(op.Value, op.Offset, "a read found", op)
		if i, ok := c.produces[op.Value]; ok && c.all[i].Invoke > op.Return {
			c.report(FutureRead, op.Offset, "the read ended before the record's produce began", op, c.all[i])
		}
		if op.Offset < c.log.Start {
			continue
		}
		if holder, ok := c.at[op.Offset]; !ok {
			c.report(ReadMismatch, op.Offset, fmt.Sprintf("a read found %q, the final log has nothing there",
				op.Value), op)
		} else if holder != op.Value {
			c.report(ReadMismatch, op.Offset, fmt.Sprintf("a read found %q, the final log holds %q",
				op.Value, holder), op)
		}
	}
}

// checkRealTime checks that offsets follow real time: once an offset is
// known to be filled (an ack at it returned, or a read found it), an
// operation that begins later is acknowledged above it and finds nothing
// only above it.
func (c *logChecker) checkRealTime() {
	var witnesses, subjects []Operation
	for _, op := range c.operations {
		witness := (op.Kind == KindProduce && op.Outcome == OutcomeOK) || (op.Kind == KindRead && op.Found)
		if witness {
			witnesses = append(witnesses, op)
		}
		if (op.Kind == KindProduce && op.Outcome == OutcomeOK) || (op.Kind == KindRead && !op.Found) {
			subjects = append(subjects, op)
		}
	}
	slices.SortStableFunc(witnesses, func(a, b Operation) int { return cmp.Compare(a.Return, b.Return) })
	slices.SortStableFunc(subjects, func(a, b Operation) int { return cmp.Compare(a.Invoke, b.Invoke) })
	var highest *Operation // the witness of the highest filled offset so far
	next := 0
	for _, op := range subjects {
		for next < len(witnesses) && witnesses[next].Return < op.Invoke {
			if highest == nil || witnesses[next].Offset > highest.Offset {
				highest = &witnesses[next]
			}
			next++
		}
		if highest == nil || op.Offset > highest.Offset {
			continue
		}
		what := "acknowledged at"
		if op.Kind == KindRead {
			what = "found nothing at"
		}
		c.report(RealTimeOrder, op.Offset, fmt.Sprintf("%s %d after offset %d was known filled",
			what, op.Offset, highest.Offset), *highest, op)
	}
}
