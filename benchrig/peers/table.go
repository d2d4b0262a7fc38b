package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Durability labels. Each side of a row carries one; the label says what an
// acknowledgement (or a stored record) survives.
const (
	labelIronBus          = "ironbus-sync"
	labelJetStreamAlways  = "jetstream-always"
	labelJetStreamDefault = "jetstream-default"
	labelNATSCore         = "nats-core"
	labelRawDisk          = "raw-disk"
	labelTCPFloor         = "tcp-floor"
)

// durabilityClass groups labels whose numbers may share a ratio: two sides
// with the same class promise the same thing, so dividing them is fair.
var durabilityClass = map[string]string{
	labelIronBus:          "fsync before ack",
	labelJetStreamAlways:  "fsync before ack",
	labelRawDisk:          "fsync before ack",
	labelTCPFloor:         "fsync before ack",
	labelJetStreamDefault: "page cache, not power-loss safe",
	labelNATSCore:         "none: memory, at most once",
	// A replicated ack: on a majority's disks, or in a majority's page
	// caches (lost if a majority loses power at once).
	labelIronBusR3:          "fsync on a majority before ack",
	labelJetStreamR3Always:  "fsync on a majority before ack",
	labelJetStreamR3Default: "a majority's page caches",
}

// errMixedDurability is the refusal to divide numbers that promise
// different things in a row whose name does not say so.
var errMixedDurability = errors.New("durability labels differ and the row's name does not say so")

// metric names one measured series: which side, what, at which payload.
type metric struct {
	side    string // a durability label
	name    string // P1, P2a, L1-p50, sync-rate, ...
	payload int
}

// samples holds every run's value of each metric.
type samples map[metric][]float64

func (s samples) add(m metric, value float64) { s[m] = append(s[m], value) }

// summary is the median of a series with its spread.
type summary struct {
	Median float64
	Min    float64
	Max    float64
	Runs   int
}

func summarize(values []float64) (summary, bool) {
	if len(values) == 0 {
		return summary{}, false
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	median := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		median = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
	}
	return summary{Median: median, Min: sorted[0], Max: sorted[len(sorted)-1], Runs: len(sorted)}, true
}

// rowSpec declares one line of the table: which IronBus metric is set
// against which peer metric, and the target the ratio is read against.
type rowSpec struct {
	id      string // P1, P2a, ... as in the issue
	title   string // what the reader sees; names both sides when durability differs
	payload int
	unit    string
	ironbus metric
	peer    metric
	// crossDurability allows a ratio between different durability
	// classes; the title must then say "X vs Y" (checked in ratioOf).
	crossDurability bool
	lowerIsBetter   bool
	target          float64 // 0: no target
	note            string
}

// Row is one line of the published table and of peers.json.
type Row struct {
	Row          string  `json:"row"`
	Title        string  `json:"title"`
	PayloadBytes int     `json:"payload_bytes"`
	IronBus      float64 `json:"ironbus"`
	IronBusLabel string  `json:"ironbus_label"`
	Peer         float64 `json:"peer"`
	PeerLabel    string  `json:"peer_label"`
	Ratio        float64 `json:"ratio"`
	Unit         string  `json:"unit"`
	// MinMax is {"ironbus": [min, max], "peer": [min, max]}.
	MinMax        map[string][2]float64 `json:"min_max"`
	Runs          int                   `json:"runs"`
	LowerIsBetter bool                  `json:"lower_is_better,omitempty"`
	Target        string                `json:"target,omitempty"`
	Meets         *bool                 `json:"meets_target,omitempty"`
	Note          string                `json:"note,omitempty"`
}

// build turns the declared rows and the measured samples into the table.
// A row whose sides were not both measured is left out; a row that would
// divide different durability labels without saying so fails the build.
func build(specs []rowSpec, measured samples) ([]Row, error) {
	var rows []Row
	for _, spec := range specs {
		ironbus, haveIronBus := summarize(measured[spec.ironbus])
		peer, havePeer := summarize(measured[spec.peer])
		if !haveIronBus || !havePeer {
			continue
		}
		ratio, err := ratioOf(spec, ironbus.Median, peer.Median)
		if err != nil {
			return nil, fmt.Errorf("row %s %d B: %w", spec.id, spec.payload, err)
		}
		row := Row{Row: spec.id, Title: spec.title, PayloadBytes: spec.payload,
			IronBus: ironbus.Median, IronBusLabel: spec.ironbus.side,
			Peer: peer.Median, PeerLabel: spec.peer.side, Ratio: ratio, Unit: spec.unit,
			MinMax: map[string][2]float64{"ironbus": {ironbus.Min, ironbus.Max}, "peer": {peer.Min, peer.Max}},
			Runs:   min(ironbus.Runs, peer.Runs), LowerIsBetter: spec.lowerIsBetter, Note: spec.note}
		if spec.target > 0 {
			meets := ratio >= spec.target
			comparison := "≥"
			if spec.lowerIsBetter {
				meets, comparison = ratio <= spec.target, "≤"
			}
			row.Target, row.Meets = fmt.Sprintf("%s %g×", comparison, spec.target), &meets
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// ratioOf divides IronBus by the peer, refusing sides that promise
// different durability unless the row's title says which is which.
func ratioOf(spec rowSpec, ironbus, peer float64) (float64, error) {
	if durabilityClass[spec.ironbus.side] != durabilityClass[spec.peer.side] {
		if !spec.crossDurability || !strings.Contains(spec.title, " vs ") {
			return 0, fmt.Errorf("%w (%s against %s)", errMixedDurability, spec.ironbus.side, spec.peer.side)
		}
	}
	if peer == 0 {
		return 0, errors.New("the peer measured zero")
	}
	return ironbus / peer, nil
}

// printTable writes the table as aligned text for a terminal.
func printTable(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "%-9s %-68s %5s %-17s %-17s %13s %13s %8s %9s\n",
		"row", "what", "bytes", "ironbus label", "peer label", "ironbus", "peer", "ratio", "target")
	for _, row := range rows {
		fmt.Fprintf(w, "%-9s %-68s %5d %-17s %-17s %13s %13s %8s %9s\n",
			row.Row, row.Title, row.PayloadBytes, row.IronBusLabel, row.PeerLabel,
			formatValue(row.IronBus, row.Unit), formatValue(row.Peer, row.Unit),
			fmt.Sprintf("%.2f×", row.Ratio), verdict(row))
	}
}

func verdict(row Row) string {
	switch {
	case row.Meets == nil:
		return ""
	case *row.Meets:
		return row.Target + " ok"
	default:
		return row.Target + " MISS"
	}
}

// formatValue prints a number with thousands separators and its unit.
func formatValue(value float64, unit string) string {
	if value >= 100 {
		return groupThousands(int64(value+0.5)) + " " + unit
	}
	return fmt.Sprintf("%.1f %s", value, unit)
}

func groupThousands(n int64) string {
	digits := fmt.Sprint(n)
	var out strings.Builder
	for i, digit := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			out.WriteByte(',')
		}
		out.WriteRune(digit)
	}
	return out.String()
}
