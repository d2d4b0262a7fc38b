package topview

import (
	"cmp"
	"fmt"
	"sort"
	"strings"

	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/monitor"
)

// SortColumn is the column the group table is ordered by.
type SortColumn int

// The group table's sort columns, in the order the `s` key cycles them.
// Counts sort largest first (the group in trouble on top), names A to Z;
// `r` reverses either.
const (
	SortLag SortColumn = iota
	SortInFlight
	SortRedelivered
	SortDeadLettered
	SortName
	sortColumns
)

var sortNames = [...]string{SortLag: "lag", SortInFlight: "in flight", SortRedelivered: "redelivered",
	SortDeadLettered: "dead-lettered", SortName: "name"}

func (c SortColumn) String() string {
	if c < 0 || c >= sortColumns {
		return fmt.Sprintf("column(%d)", int(c))
	}
	return sortNames[c]
}

// Next is the column after c, wrapping around.
func (c SortColumn) Next() SortColumn { return (c + 1) % sortColumns }

// ParseSortColumn maps a name (as String gives it, or with a dash for the
// space) to its column.
func ParseSortColumn(name string) (SortColumn, bool) {
	name = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "-", " ")
	for c, known := range sortNames {
		if strings.ReplaceAll(known, "-", " ") == name {
			return SortColumn(c), true
		}
	}
	return 0, false
}

// TableOptions are what the keys change: the group order and a filter on
// stream and group names.
type TableOptions struct {
	Sort    SortColumn
	Reverse bool
	// Filter keeps the rows whose stream or group name contains it, case
	// insensitively; empty keeps all.
	Filter string
}

// GroupName is how a group is labelled: stream/partition:group.
func GroupName(g health.Group) string {
	return monitor.StreamLabel(g.Stream, g.Partition) + ":" + g.Name
}

func matches(filter string, names ...string) bool {
	if filter == "" {
		return true
	}
	filter = strings.ToLower(filter)
	for _, name := range names {
		if strings.Contains(strings.ToLower(name), filter) {
			return true
		}
	}
	return false
}

// Groups returns the groups the filter keeps, in the chosen order; the
// input is not changed. Ties fall back to the name so the order is stable
// from one refresh to the next.
func Groups(groups []health.Group, options TableOptions) []health.Group {
	out := make([]health.Group, 0, len(groups))
	for _, g := range groups {
		if matches(options.Filter, g.Stream, g.Name) {
			out = append(out, g)
		}
	}
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		order := compareGroups(a, b, options.Sort)
		if order == 0 {
			order = cmp.Compare(GroupName(a), GroupName(b))
		}
		if options.Reverse {
			return order > 0
		}
		return order < 0
	})
	return out
}

// compareGroups orders counts largest first and names alphabetically.
func compareGroups(a, b health.Group, column SortColumn) int {
	switch column {
	case SortInFlight:
		return cmp.Compare(b.InFlight, a.InFlight)
	case SortRedelivered:
		return cmp.Compare(b.Redelivered, a.Redelivered)
	case SortDeadLettered:
		return cmp.Compare(b.DeadLettered, a.DeadLettered)
	case SortName:
		return cmp.Compare(GroupName(a), GroupName(b))
	default:
		return cmp.Compare(b.Lag, a.Lag)
	}
}

// Streams returns the streams the filter keeps, by name.
func Streams(streams []health.Stream, filter string) []health.Stream {
	out := make([]health.Stream, 0, len(streams))
	for _, s := range streams {
		if matches(filter, s.Name) {
			out = append(out, s)
		}
	}
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.SliceStable(out, func(i, j int) bool {
		return monitor.StreamLabel(out[i].Name, out[i].Partition) < monitor.StreamLabel(out[j].Name, out[j].Partition)
	})
	return out
}
