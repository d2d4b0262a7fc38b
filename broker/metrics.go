package broker

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/segment"
)

// Metrics. The broker owns one prometheus.Registry (never the default
// one: two brokers in one process, as in tests, must not share counters).
// Three histograms are fed by the storage engine through
// segment.Observer, whose Observe calls are lock-free; every other metric
// is read at scrape time from the /admin snapshot, so the hot paths keep
// only the atomic counters they already had.
//
// Label cardinality is capped: the first MetricStreamLabels streams by
// name get a stream label of their own and the rest are summed under
// stream="_other"; likewise MetricGroupLabels groups (ordered by stream,
// then name) under group="_other". Offsets, which cannot be summed, are
// not reported for the aggregate.

// Label caps (docs/OBSERVABILITY.md).
const (
	MetricStreamLabels = 64
	MetricGroupLabels  = 128
	otherLabel         = "_other"
)

// recentSyncCount is how many of the latest fdatasync durations /admin
// summarises as p50/p99/max.
const recentSyncCount = 1024

// metrics is the broker's registry, the storage observer, and the ring of
// recent sync durations.
type metrics struct {
	registry      *prometheus.Registry
	syncDuration  prometheus.Histogram
	appendSeconds prometheus.Histogram
	syncRecords   prometheus.Histogram
	syncedRecords atomic.Uint64

	recent     [recentSyncCount]atomic.Int64 // nanoseconds, 0: empty
	recentNext atomic.Uint64
}

var _ segment.Observer = (*metrics)(nil)

func newMetrics(b *Broker) *metrics {
	m := &metrics{registry: prometheus.NewRegistry()}
	m.syncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ironbus_fsync_duration_seconds",
		Help:    "Duration of each fdatasync of a log (group commit), failed ones included.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
	m.appendSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ironbus_append_duration_seconds",
		Help:    "Duration of each batch write into a segment, before its fdatasync.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 2, 16)})
	m.syncRecords = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ironbus_fsync_records",
		Help:    "Records made durable by each fdatasync (the group-commit batch size).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 17)})
	m.registry.MustRegister(m.syncDuration, m.appendSeconds, m.syncRecords, snapshotCollector{b},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.registry.MustRegister(compactionMetrics(b)...)
	return m
}

// ObserveAppend implements segment.Observer.
func (m *metrics) ObserveAppend(elapsed time.Duration, _ int, _ int) {
	m.appendSeconds.Observe(elapsed.Seconds())
}

// ObserveSync implements segment.Observer.
func (m *metrics) ObserveSync(elapsed time.Duration, records uint64) {
	m.syncDuration.Observe(elapsed.Seconds())
	m.syncRecords.Observe(float64(records))
	m.syncedRecords.Add(records)
	slot := m.recentNext.Add(1) - 1
	m.recent[slot%recentSyncCount].Store(max(int64(elapsed), 1))
}

// recentSyncs returns the recorded durations of the latest syncs.
func (m *metrics) recentSyncs() []time.Duration {
	durations := make([]time.Duration, 0, recentSyncCount)
	for i := range m.recent {
		if d := m.recent[i].Load(); d > 0 {
			durations = append(durations, time.Duration(d))
		}
	}
	return durations
}

// RegisterCollector adds a collector to the broker's registry, for parts
// the server adds after the engine opened (the cluster door).
func (b *Broker) RegisterCollector(c prometheus.Collector) error {
	return b.metrics.registry.Register(c)
}

// Metrics implements health.Source: the broker's own registry, which
// /metrics exposes.
func (b *Broker) Metrics() prometheus.Gatherer { return b.metrics.registry }

// storageObserver returns what the storage engine reports to: the
// broker's metrics, and also the observer the caller configured.
func storageObserver(m *metrics, configured segment.Observer) segment.Observer {
	if configured == nil {
		return m
	}
	return observers{m, configured}
}

type observers [2]segment.Observer

func (o observers) ObserveAppend(elapsed time.Duration, records, bytes int) {
	o[0].ObserveAppend(elapsed, records, bytes)
	o[1].ObserveAppend(elapsed, records, bytes)
}

func (o observers) ObserveSync(elapsed time.Duration, records uint64) {
	o[0].ObserveSync(elapsed, records)
	o[1].ObserveSync(elapsed, records)
}

// snapshotCollector turns the /admin snapshot into metrics at scrape time.
type snapshotCollector struct{ b *Broker }

// Describe sends nothing: the collector is unchecked, because its label
// values (streams, groups) are known only when scraped.
func (snapshotCollector) Describe(chan<- *prometheus.Desc) {}

func (c snapshotCollector) Collect(out chan<- prometheus.Metric) {
	doc := c.b.Admin()
	emit := emitter{out: out}
	emit.gauge("ironbus_build_info", "Always 1; the version label names the build.", 1, "version", doc.Version)
	emit.gauge("ironbus_uptime_seconds", "Seconds since the broker opened its data directory.", doc.UptimeSeconds)
	emit.gauge("ironbus_ready", "1 while the broker accepts writes (/readyz 200), else 0.", boolFloat(doc.Readiness.Ready))
	collectStreams(&emit, doc.Streams)
	collectGroups(&emit, doc.Groups)
	collectStorage(&emit, doc)
	collectRecovery(&emit, doc.Recovery)
	collectDedup(&emit, c.b.Dedup())
	emit.gauge("ironbus_connections", "Client connections open now.", float64(doc.Connections.Open))
	emit.counter("ironbus_connections_accepted_total", "Client connections accepted since start.", float64(doc.Connections.Accepted))
	for reason, count := range doc.Connections.Rejected {
		emit.counter("ironbus_connections_rejected_total", "Client connections refused since start, by reason.", float64(count), "reason", reason)
	}
	refused, shed := c.b.NoAckDropped()
	emit.counter("ironbus_no_ack_dropped_total", "Fire-and-forget (no-ack) records dropped without an answer: refused (bad input, permission, a failed check) or shed under overload within the budget.", float64(refused), "reason", "refused")
	emit.counter("ironbus_no_ack_dropped_total", "Fire-and-forget (no-ack) records dropped without an answer: refused (bad input, permission, a failed check) or shed under overload within the budget.", float64(shed), "reason", "shed")
	for _, reactor := range doc.Reactors {
		emit.counter("ironbus_reactor_busy_seconds_total", "Time each network reactor spent handling events; its rate is the reactor's busy ratio.",
			reactor.BusySeconds, "reactor", strconv.Itoa(reactor.Index))
	}
}

func collectStreams(emit *emitter, streams []health.Stream) {
	streams = perStream(streams)
	var other health.Stream
	var others bool
	for i, s := range streams {
		if i >= MetricStreamLabels {
			others = true
			other.ProducedRecords += s.ProducedRecords
			other.ProducedBytes += s.ProducedBytes
			other.DiskBytes += s.DiskBytes
			other.Segments += s.Segments
			other.Records += s.Records
			if s.Frozen != "" {
				other.Frozen = s.Frozen
			}
			if s.DeadLetter != nil {
				other.DeadLetter = &health.DeadLetter{DiskBytes: s.DeadLetter.DiskBytes + deadLetterBytes(other.DeadLetter)}
			}
			continue
		}
		emit.gauge("ironbus_log_next_offset", "The offset the next record of the log gets: every offset below it is durable.", float64(s.NextOffset), "stream", s.Name)
		emit.gauge("ironbus_log_first_offset", "The lowest offset the log still stores.", float64(s.FirstOffset), "stream", s.Name)
		collectStream(emit, s, s.Name)
	}
	if others {
		collectStream(emit, other, otherLabel)
	}
}

// perStream folds the partitions of each stream into one entry (the
// /admin document lists them one by one, sorted by stream then
// partition): a stream is one label value whatever its partitions, so
// the series count stays bounded by streams. Offsets are summed over the
// partitions, so next minus first is still the records the stream holds.
func perStream(partitions []health.Stream) []health.Stream {
	out := make([]health.Stream, 0, len(partitions))
	for _, p := range partitions {
		n := len(out)
		if n == 0 || out[n-1].Name != p.Name {
			out = append(out, p)
			continue
		}
		s := &out[n-1]
		s.FirstOffset += p.FirstOffset
		s.NextOffset += p.NextOffset
		s.Records += p.Records
		s.DiskBytes += p.DiskBytes
		s.Segments += p.Segments
		s.ProducedRecords += p.ProducedRecords
		s.ProducedBytes += p.ProducedBytes
		if p.Frozen != "" {
			s.Frozen = p.Frozen
		}
	}
	return out
}

func deadLetterBytes(d *health.DeadLetter) int64 {
	if d == nil {
		return 0
	}
	return d.DiskBytes
}

func collectStream(emit *emitter, s health.Stream, label string) {
	emit.counter("ironbus_produced_records_total", "Records written to the log since start.", float64(s.ProducedRecords), "stream", label)
	emit.counter("ironbus_produced_bytes_total", "Record bytes written to the log since start.", float64(s.ProducedBytes), "stream", label)
	emit.gauge("ironbus_log_records", "Records the log stores.", float64(s.Records), "stream", label)
	emit.gauge("ironbus_log_disk_bytes", "Bytes of the log's segments on disk.", float64(s.DiskBytes), "stream", label)
	emit.gauge("ironbus_log_segments", "Segments of the log.", float64(s.Segments), "stream", label)
	emit.gauge("ironbus_log_frozen", "1 when the log is frozen read-only (failed fsync, damage above the caps): writer health.",
		boolFloat(s.Frozen != ""), "stream", label)
	emit.gauge("ironbus_dead_letter_disk_bytes", "Bytes of the stream's dead-letter queue on disk.", float64(deadLetterBytes(s.DeadLetter)), "stream", label)
}

func collectGroups(emit *emitter, groups []health.Group) {
	var other health.Group
	var others bool
	for i, g := range groups {
		if i >= MetricGroupLabels {
			others = true
			other.Delivered += g.Delivered
			other.Redelivered += g.Redelivered
			other.Acked += g.Acked
			other.DeadLettered += g.DeadLettered
			other.Lag += g.Lag
			other.InFlight += g.InFlight
			other.Unsettled += g.Unsettled
			other.Members += g.Members
			continue
		}
		emit.gauge("ironbus_group_committed_offset", "The group's cursor: every offset below it is done.", float64(g.CommittedOffset), "stream", g.Stream, "group", g.Name)
		collectGroup(emit, g, g.Stream, g.Name)
	}
	if others {
		collectGroup(emit, other, otherLabel, otherLabel)
	}
}

func collectGroup(emit *emitter, g health.Group, stream, group string) {
	labels := []string{"stream", stream, "group", group}
	emit.counter("ironbus_group_delivered_records_total", "Records handed to the group's consumers since it opened.", float64(g.Delivered), labels...)
	emit.counter("ironbus_group_redelivered_records_total", "Records handed out again (lease lapsed, nack, member left).", float64(g.Redelivered), labels...)
	emit.counter("ironbus_group_acked_records_total", "Records the group settled by ack or cursor since it opened.", float64(g.Acked), labels...)
	emit.counter("ironbus_group_dead_lettered_records_total", "Records the group moved to the dead-letter queue.", float64(g.DeadLettered), labels...)
	emit.gauge("ironbus_group_lag_records", "Records between the group's cursor and the log's end.", float64(g.Lag), labels...)
	emit.gauge("ironbus_group_in_flight_records", "Records leased to the group's consumers and not yet settled.", float64(g.InFlight), labels...)
	emit.gauge("ironbus_group_unsettled_records", "Records delivered and not yet done: leased, waiting out a nack, parked or moving.", float64(g.Unsettled), labels...)
	emit.gauge("ironbus_group_members", "Consumers holding the group now.", float64(g.Members), labels...)
}

func collectStorage(emit *emitter, doc *health.Admin) {
	storage, fsync, memory := doc.Storage, doc.Fsync, doc.Memory
	emit.gauge("ironbus_frozen_logs", "Stream logs frozen read-only.", float64(storage.FrozenLogs))
	emit.gauge("ironbus_quarantine_bytes", "Damaged bytes kept under quarantine/ for inspection.", float64(storage.QuarantineBytes))
	emit.gauge("ironbus_filesystem_size_bytes", "Size of the file system holding the data directory (0: unknown).", float64(storage.FilesystemBytes))
	emit.gauge("ironbus_filesystem_free_bytes", "Free bytes of the file system holding the data directory.", float64(storage.FilesystemFreeBytes))
	emit.counter("ironbus_commit_cycles_total", "Committer cycles (each syncs every dirty log once).", float64(fsync.Cycles))
	emit.gauge("ironbus_fsync_running_seconds", "How long the fdatasync running now has taken (0: none); grows on a hung device.", fsync.RunningSeconds)
	emit.gauge("ironbus_memory_budget_bytes", "The RAM budget: the sum of every bounded pool's worst case.", float64(memory.BudgetBytes))
	emit.gauge("ironbus_memory_ceiling_bytes", "The RAM ceiling (--ram-ceiling; 0: none).", float64(memory.CeilingBytes))
	emit.gauge("ironbus_memory_headroom_bytes", "The ceiling minus the budget (0 without a ceiling).", float64(memory.HeadroomBytes))
}

// collectRecovery reports what recovery (and reads since) dropped, by
// reason: torn tails (never acknowledged) and the reasons that are loss.
func collectRecovery(emit *emitter, entries []health.RecoveryEntry) {
	events, bytes, records := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for reason := segment.ReasonTornTail; reason <= segment.ReasonCorruptFooter; reason++ {
		events[reason.String()] = 0 // every reason is present from the first scrape, for rate()
	}
	for _, entry := range entries {
		for _, ev := range entry.Report.Events {
			reason := ev.Reason.String()
			events[reason]++
			bytes[reason] += float64(ev.Bytes)
			records[reason] += float64(ev.Records)
		}
	}
	for reason := range events {
		emit.counter("ironbus_recovery_events_total", "Recovery events (damage or torn tails) found since start, by reason.", events[reason], "reason", reason)
		emit.counter("ironbus_recovery_dropped_bytes_total", "Bytes recovery dropped or skipped since start, by reason.", bytes[reason], "reason", reason)
		emit.counter("ironbus_recovery_lost_records_total", "Records recovery dropped or skipped since start, by reason.", records[reason], "reason", reason)
	}
}

// emitter builds constant metrics; a metric that cannot be built (it
// cannot happen with these names) is skipped rather than panicking.
type emitter struct {
	out chan<- prometheus.Metric
}

func (e emitter) gauge(name, help string, value float64, labels ...string) {
	e.emit(prometheus.GaugeValue, name, help, value, labels)
}

func (e emitter) counter(name, help string, value float64, labels ...string) {
	e.emit(prometheus.CounterValue, name, help, value, labels)
}

func (e emitter) emit(kind prometheus.ValueType, name, help string, value float64, labels []string) {
	names, values := make([]string, 0, len(labels)/2), make([]string, 0, len(labels)/2)
	for i := 0; i+1 < len(labels); i += 2 {
		names, values = append(names, labels[i]), append(values, labels[i+1])
	}
	metric, err := prometheus.NewConstMetric(prometheus.NewDesc(name, help, names, nil), kind, value, values...)
	if err == nil {
		e.out <- metric
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
