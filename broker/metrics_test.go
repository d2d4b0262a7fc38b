package broker

import (
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/segment"
)

// TestStreamLabelsAreCapped creates more streams than get a label of
// their own: the first MetricStreamLabels by name keep theirs, the rest
// are summed under stream="_other", so a broker with many streams cannot
// blow up the scrape or a Prometheus server.
func TestStreamLabelsAreCapped(t *testing.T) {
	streams := MetricStreamLabels + 3
	b := openTestBroker(t, Config{MaxStreams: streams + 1, Storage: segment.Options{SegmentSize: segment.MinSegmentSize}})
	for i := range streams {
		produceN(t, b, fmt.Sprintf("s%03d", i), 1)
	}
	families, err := b.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]float64{}
	for _, family := range families {
		if family.GetName() != "ironbus_produced_records_total" {
			continue
		}
		for _, metric := range family.GetMetric() {
			for _, label := range metric.GetLabel() {
				labels[label.GetValue()] = metric.GetCounter().GetValue()
			}
		}
	}
	if len(labels) != MetricStreamLabels+1 || labels[otherLabel] != 3 || labels["s000"] != 1 {
		t.Fatalf("%d stream labels (want %d), _other = %v (want 3), s000 = %v", len(labels), MetricStreamLabels+1,
			labels[otherLabel], labels["s000"])
	}
	if _, ok := labels[fmt.Sprintf("s%03d", streams-1)]; ok {
		t.Fatal("a stream past the cap kept its own label")
	}
}

// A multi-partition stream is one metrics label: its partitions are
// folded, so no series repeats.
func TestMetricsFoldPartitions(t *testing.T) {
	b := openTestBroker(t, Config{})
	if _, _, err := b.CreateStream(StreamSettings{Name: "wide", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	for p := uint32(0); p < 3; p++ {
		if _, err := appendRecord(t, partitionOf(t, b, "wide", p), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	folded := perStream(b.Admin().Streams)
	if len(folded) != 1 || folded[0].Records != 3 || folded[0].NextOffset != 3 {
		t.Fatalf("folded %+v", folded)
	}
}
