package monitor

import (
	"slices"
	"testing"
	"time"

	"github.com/ironbus/ironbus/broker/health"
)

func admin(uptime float64, produced, bytes, delivered uint64, busy float64) *health.Admin {
	return &health.Admin{Schema: health.AdminSchema, Version: "test", UptimeSeconds: uptime,
		Readiness: health.Readiness{Ready: true},
		Totals:    health.Totals{ProducedRecords: produced, ProducedBytes: bytes, DeliveredRecords: delivered, AckedRecords: delivered},
		Streams:   []health.Stream{{Name: "orders", ProducedRecords: produced, Records: produced, NextOffset: produced}},
		Reactors:  []health.Reactor{{Index: 0, BusySeconds: busy}},
		Fsync:     health.Fsync{Syncs: produced / 10},
	}
}

func TestComputeRatesFromTwoSnapshots(t *testing.T) {
	start := time.Unix(1000, 0)
	previous := Sample{At: start, Admin: admin(10, 1000, 100_000, 500, 1)}
	current := Sample{At: start.Add(2 * time.Second), Admin: admin(12, 3000, 300_000, 900, 2)}
	rates, ok := ComputeRates(previous, current)
	if !ok {
		t.Fatal("no rates from two good snapshots")
	}
	if rates.ProducedRecords != 1000 || rates.ProducedBytes != 100_000 || rates.DeliveredRecords != 200 || rates.Syncs != 100 {
		t.Errorf("rates %+v", rates)
	}
	if !slices.Equal(rates.ReactorBusy, []float64{0.5}) {
		t.Errorf("reactor busy now %v, want [0.5]", rates.ReactorBusy)
	}
	if rates.StreamRecords["orders/0"] != 1000 {
		t.Errorf("stream rate %v", rates.StreamRecords)
	}
}

func TestComputeRatesRefusesWhatIsNotAnInterval(t *testing.T) {
	start := time.Unix(1000, 0)
	good := Sample{At: start, Admin: admin(10, 1000, 1, 1, 0)}
	for name, pair := range map[string][2]Sample{
		"first missing":      {{}, good},
		"no time between":    {good, good},
		"clock went back":    {good, {At: start.Add(-time.Second), Admin: admin(11, 2000, 2, 2, 0)}},
		"broker restarted":   {good, {At: start.Add(time.Second), Admin: admin(1, 10, 1, 1, 0)}},
		"counters went back": {good, {At: start.Add(time.Second), Admin: admin(11, 10, 1, 1, 0)}},
	} {
		if rates, ok := ComputeRates(pair[0], pair[1]); ok {
			t.Errorf("%s: got rates %+v", name, rates)
		}
	}
}

func TestHistoryIsBounded(t *testing.T) {
	var h History
	for i := range 3 * HistoryLength {
		h.Add(Rates{ProducedRecords: float64(i)})
	}
	if h.Len() != HistoryLength {
		t.Fatalf("history holds %d, want %d", h.Len(), HistoryLength)
	}
	series := h.Series(func(r Rates) float64 { return r.ProducedRecords })
	if series[0] != 2*HistoryLength || series[len(series)-1] != 3*HistoryLength-1 {
		t.Errorf("history kept %v..%v, want the newest", series[0], series[len(series)-1])
	}
}
