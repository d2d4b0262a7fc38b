package consumer

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ironbus/ironbus/segment"
)

// Summary is what a group's last checkpoint says, for operators: read
// without opening the group, so it works on a read-only directory and
// changes nothing.
type Summary struct {
	Name string
	Type Type
	// Committed: every offset below it is done.
	Committed uint64
	// AckedAhead counts the offsets done above Committed (acked out of
	// order); a crash never redelivers them.
	AckedAhead uint64
	// Unsettled counts the records above Committed with a delivery count
	// (leased, waiting out a nack, or delivered and lapsed).
	Unsettled int
	// MostDeliveries is the highest delivery count among them: how close
	// the worst record is to the dead-letter queue.
	MostDeliveries uint32
	// PendingMoves counts dead-letter moves begun and not yet finished.
	PendingMoves int
	// Members and Leased are live figures: the consumers holding the group
	// and their leases. A summary read from a checkpoint has neither.
	Members, Leased int
}

// Inspect returns the summary of every group of log, by name.
func Inspect(log *segment.Log) ([]Summary, error) {
	names, err := log.Checkpoints()
	if err != nil {
		return nil, fmt.Errorf("consumer: list groups: %w", err)
	}
	var summaries []Summary
	for _, checkpoint := range names {
		name, ok := strings.CutPrefix(checkpoint, checkpointPrefix)
		if !ok {
			continue
		}
		summary, err := InspectGroup(log, name)
		if err != nil {
			return summaries, err
		}
		summaries = append(summaries, summary)
	}
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.Slice(summaries, func(i, j int) bool { return summaries[i].Name < summaries[j].Name })
	return summaries, nil
}

// InspectGroup returns one group's summary; ErrNoGroup when log has none
// by that name.
func InspectGroup(log *segment.Log, name string) (Summary, error) {
	data, err := log.ReadCheckpoint(checkpointPrefix + name)
	if errors.Is(err, segment.ErrNotFound) {
		return Summary{}, fmt.Errorf("%w: %q", ErrNoGroup, name)
	}
	if err != nil {
		return Summary{}, fmt.Errorf("consumer: group %s: %w", name, err)
	}
	st, err := decodeState(data)
	if err != nil {
		return Summary{}, fmt.Errorf("consumer: group %s: %w", name, err)
	}
	summary := Summary{Name: name, Type: st.Type, Committed: st.Committed, Unsettled: len(st.Counts), PendingMoves: len(st.Moves)}
	for _, span := range st.Done {
		summary.AckedAhead += span.To - span.From
	}
	for _, count := range st.Counts {
		summary.MostDeliveries = max(summary.MostDeliveries, count.Deliveries)
	}
	return summary, nil
}
