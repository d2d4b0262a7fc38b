package monitor

import (
	"fmt"
	"time"

	"github.com/ironbus/ironbus/broker/health"
)

// Sample is one /admin snapshot and when it was taken (monotonic time: a
// wall-clock step between two samples must not invent a rate).
type Sample struct {
	At    time.Time
	Admin *health.Admin
}

// Rates are per-second figures over the interval between two samples.
type Rates struct {
	Seconds             float64 `json:"interval_seconds"`
	ProducedRecords     float64 `json:"produced_records_per_second"`
	ProducedBytes       float64 `json:"produced_bytes_per_second"`
	DeliveredRecords    float64 `json:"delivered_records_per_second"`
	AckedRecords        float64 `json:"acked_records_per_second"`
	RedeliveredRecords  float64 `json:"redelivered_records_per_second"`
	DeadLetteredRecords float64 `json:"dead_lettered_records_per_second"`
	Syncs               float64 `json:"syncs_per_second"`
	// ReactorBusy is each reactor's busy share of the interval (0..1),
	// the load now rather than /admin's average since start.
	ReactorBusy []float64 `json:"reactor_busy"`
	// StreamRecords is records produced per second per stream partition,
	// keyed "stream/partition".
	StreamRecords map[string]float64 `json:"stream_records_per_second"`
}

// ComputeRates returns the rates between two samples, or false when there
// are none to give: a missing sample, no time between them, or a broker
// that restarted in between (its counters went back).
func ComputeRates(previous, current Sample) (Rates, bool) {
	if previous.Admin == nil || current.Admin == nil {
		return Rates{}, false
	}
	seconds := current.At.Sub(previous.At).Seconds()
	if seconds <= 0 || current.Admin.UptimeSeconds < previous.Admin.UptimeSeconds {
		return Rates{}, false
	}
	before, after := previous.Admin.Totals, current.Admin.Totals
	if after.ProducedRecords < before.ProducedRecords || after.DeliveredRecords < before.DeliveredRecords {
		return Rates{}, false
	}
	per := func(a, b uint64) float64 {
		if b < a {
			return 0
		}
		return float64(b-a) / seconds
	}
	rates := Rates{
		Seconds:             seconds,
		ProducedRecords:     per(before.ProducedRecords, after.ProducedRecords),
		ProducedBytes:       per(before.ProducedBytes, after.ProducedBytes),
		DeliveredRecords:    per(before.DeliveredRecords, after.DeliveredRecords),
		AckedRecords:        per(before.AckedRecords, after.AckedRecords),
		RedeliveredRecords:  per(before.RedeliveredRecords, after.RedeliveredRecords),
		DeadLetteredRecords: per(before.DeadLetteredRecords, after.DeadLetteredRecords),
		Syncs:               per(previous.Admin.Fsync.Syncs, current.Admin.Fsync.Syncs),
		ReactorBusy:         reactorBusy(previous.Admin.Reactors, current.Admin.Reactors, seconds),
		StreamRecords:       map[string]float64{},
	}
	produced := make(map[string]uint64, len(previous.Admin.Streams))
	for _, s := range previous.Admin.Streams {
		produced[StreamLabel(s.Name, s.Partition)] = s.ProducedRecords
	}
	for _, s := range current.Admin.Streams {
		label := StreamLabel(s.Name, s.Partition)
		if earlier, ok := produced[label]; ok {
			rates.StreamRecords[label] = per(earlier, s.ProducedRecords)
		}
	}
	return rates, true
}

// reactorBusy divides each reactor's busy time over the interval by the
// interval; reactors are matched by index, since their count is fixed
// for a broker's life.
func reactorBusy(before, after []health.Reactor, seconds float64) []float64 {
	busy := make(map[int]float64, len(before))
	for _, r := range before {
		busy[r.Index] = r.BusySeconds
	}
	out := make([]float64, 0, len(after))
	for _, r := range after {
		share := (r.BusySeconds - busy[r.Index]) / seconds
		out = append(out, min(max(share, 0), 1))
	}
	return out
}

// HistoryLength bounds the rates kept for sparklines: two minutes at the
// default interval, and a few KiB whatever the uptime.
const HistoryLength = 120

// History is the recent rates, oldest first, at most HistoryLength.
type History struct {
	rates []Rates
}

// Add appends one interval's rates, forgetting the oldest past the bound.
func (h *History) Add(r Rates) {
	if len(h.rates) == HistoryLength {
		copy(h.rates, h.rates[1:])
		h.rates = h.rates[:HistoryLength-1]
	}
	h.rates = append(h.rates, r)
}

// Len is the number of intervals kept.
func (h *History) Len() int { return len(h.rates) }

// Series returns one figure of every kept interval, oldest first.
func (h *History) Series(pick func(Rates) float64) []float64 {
	out := make([]float64, len(h.rates))
	for i, r := range h.rates {
		out[i] = pick(r)
	}
	return out
}

// Latest is the most recent rates, if any (none in a nil History).
func (h *History) Latest() (Rates, bool) {
	if h == nil || len(h.rates) == 0 {
		return Rates{}, false
	}
	return h.rates[len(h.rates)-1], true
}

// StreamLabel names a stream partition's log, "stream/partition": the key
// of Rates.StreamRecords.
func StreamLabel(stream string, partition uint32) string {
	return fmt.Sprintf("%s/%d", stream, partition)
}
