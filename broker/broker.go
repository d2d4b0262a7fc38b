package broker

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironbus/ironbus/brokertime"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/subject"
)

// Broker is the engine: it owns the data directory, its streams and their
// partitions' logs, consumer groups, dead-letter queues and retention.
// Adapters (the wire session, later MQTT and replication) drive it through
// its Go API; it knows no protocol.
type Broker struct {
	cfg   Config
	dir   *segment.Dir
	clock *brokertime.Clock // broker time (brokertime.go)
	// openMissing, when set, opens a stream its cluster holds that this
	// node does not serve yet (OpenMissingStreams).
	openMissing atomic.Pointer[func(stream string) bool]

	// Streams (streams.go): the catalog on disk and, in memory, each
	// stream's partitions; openLogs counts the partitions against
	// MaxStreams. logsMu guards streams and every change to openLogs,
	// which is read without it (deadLetterLog runs under group locks,
	// below logsMu in the lock order).
	catalog *datadir.Streams
	router  *subject.Router // the default domain's bindings, in step with the catalog (route.go)
	// domains holds the other routing domains' routers, by domain; it is
	// replaced, never changed, under bindMu (route.go).
	domains  atomic.Pointer[map[string]*subject.Router]
	bindMu   sync.Mutex // serializes catalog changes to bindings with router updates
	logsMu   sync.RWMutex
	streams  map[string]*Stream
	openLogs atomic.Int64
	// connectionSeq numbers connections (connections.go).
	connectionSeq atomic.Uint64

	groupsMu sync.Mutex
	groups   map[groupKey]*Group

	deadLetters     deadLetterStore
	redriveMu       sync.Mutex   // one dead-letter redrive at a time (admin.go)
	openDeadLetters atomic.Int64 // dead-letter logs open: they count against MaxStreams

	connections atomic.Int64
	draining    atomic.Bool
	stop        chan struct{}
	flushed     chan struct{}
	// checkpointDue nudges the flusher when a group's acks made a
	// checkpoint due: the ack arrived on a reactor, which must not wait
	// for the file sync itself.
	checkpointDue chan struct{}
	closeOnce     sync.Once

	retention  retentionState  // retention and the disk budget (retention_pass.go)
	compaction compactionState // key compaction, run by the retention pass (compaction.go)
	producers  *producerState  // the producer registry and table snapshots (producers.go)
	// subjectIndexes is the flusher of the partitions' subject indexes
	// (keyindex.go).
	subjectIndexes subjectIndexState
	// Observability (observe.go, metrics.go): read at scrape time only.
	started     time.Time
	heartbeat   atomic.Int64 // when the flusher last turned, nanoseconds after started
	accepted    atomic.Uint64
	rejected    [rejectReasons]atomic.Int64
	reactorBusy atomic.Pointer[func() []time.Duration]
	metrics     *metrics
	noAck       noAckCounters // fire-and-forget records dropped (noack.go)

	// txns coordinates transactions across partitions (txn.go).
	txns txnStore
}

type groupKey struct {
	stream    string
	partition uint32
	group     string
}

// Open opens the data directory (recovering every log in it) and starts
// the checkpoint flusher.
func Open(cfg Config) (*Broker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	retention, err := cfg.retentionConfig()
	if err != nil {
		return nil, err
	}
	// Every seal starts a retention pass (a log just grew by a segment)
	// and a snapshot of the log's producer table.
	nudge := make(chan struct{}, 1)
	producers := newProducerState()
	cfg.Storage.OnSeal = func(log segment.LogID) {
		producers.markDue(log)
		select {
		case nudge <- struct{}{}:
		default:
		}
	}
	b := &Broker{streams: map[string]*Stream{}, groups: map[groupKey]*Group{}, started: time.Now(),
		stop: make(chan struct{}), flushed: make(chan struct{}), checkpointDue: make(chan struct{}, 1), producers: producers}
	b.metrics = newMetrics(b)
	if err := registerCollectors(b.metrics.registry, cfg.Collectors); err != nil {
		return nil, err
	}
	cfg.Storage.Observer = storageObserver(b.metrics, cfg.Storage.Observer)
	b.cfg = cfg
	dir, err := segment.Open(cfg.FS, cfg.DataDir, cfg.Storage)
	if err != nil {
		return nil, err
	}
	b.dir = dir
	if err := b.openClock(); err != nil {
		_ = dir.Close()
		return nil, err
	}
	if err := b.openProducers(); err != nil {
		_ = b.clock.Close()
		_ = dir.Close()
		return nil, err
	}
	if err := b.openStreams(); err != nil {
		b.stopProducers()
		_ = b.clock.Close()
		_ = dir.Close()
		return nil, err
	}
	b.retention.nudge, b.retention.clock = nudge, cfg.Clock
	b.startRetention(retention)
	b.startSubjectFlusher()
	b.openTransactions()
	go b.flushCheckpoints()
	return b, nil
}

// Dir returns the data directory (for reports).
func (b *Broker) Dir() *segment.Dir { return b.dir }

// Version is the version the broker reports (Welcome, /admin).
func (b *Broker) Version() string { return b.cfg.Version }

// Logger is the broker's logger; adapters log through it by default.
func (b *Broker) Logger() *slog.Logger { return b.cfg.Logger }

// MaxRecordBytes is the largest record body the engine stores.
func (b *Broker) MaxRecordBytes() uint32 { return b.cfg.Storage.MaxRecordBytes }

// StagingBytes is the size of a partition's staging buffer: a batch of
// records larger than it is appended alone (Partition.TryAppend).
func (b *Broker) StagingBytes() int { return b.cfg.Storage.StagingBytes }

// Draining reports whether Drain was called.
func (b *Broker) Draining() bool { return b.draining.Load() }

// Drain stops accepting new streams and connections (ErrShuttingDown);
// adapters then finish their in-flight work before Close.
func (b *Broker) Drain() { b.draining.Store(true) }

// Close checkpoints every group, closes the message-id windows and broker
// time, and closes the data directory (a final sync of every log). Call
// it after the loop has drained.
func (b *Broker) Close() error {
	var err error
	b.closeOnce.Do(func() {
		b.draining.Store(true)
		close(b.stop)
		<-b.flushed
		b.stopSubjectIndexes()
		b.stopRetention()
		if cerr := b.txns.close(); cerr != nil {
			err = cerr
		}
		b.groupsMu.Lock()
		for _, served := range b.groups {
			if cerr := served.group.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		b.groupsMu.Unlock()
		if cerr := b.deadLetters.close(); cerr != nil && err == nil {
			err = cerr
		}
		for _, s := range b.streamList() {
			b.closeWindows(s)
		}
		if cerr := b.closeProducers(); cerr != nil && err == nil {
			err = cerr
		}
		if cerr := b.clock.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if cerr := b.dir.Close(); cerr != nil && err == nil {
			err = cerr
		}
	})
	return err
}

// flushCheckpoints persists moved group cursors every CheckpointInterval,
// and at once when a group's acks made a checkpoint due, so a crash
// redelivers at most that much acknowledged work; it also gives the
// message-id windows their turn (maintainWindows).
func (b *Broker) flushCheckpoints() {
	defer close(b.flushed)
	ticker := time.NewTicker(b.cfg.CheckpointInterval)
	defer ticker.Stop()
	for {
		b.heartbeat.Store(int64(time.Since(b.started)))
		select {
		case <-b.stop:
			return
		case <-ticker.C:
		case <-b.checkpointDue:
		}
		b.groupsMu.Lock()
		groups := make([]*consumer.Group, 0, len(b.groups))
		for _, served := range b.groups {
			groups = append(groups, served.group)
		}
		b.groupsMu.Unlock()
		for _, g := range groups {
			if err := g.Checkpoint(); err != nil {
				b.cfg.Logger.Warn("group checkpoint failed", "group", g.Name(), "error", err.Error())
			}
		}
		b.maintainWindows()
	}
}

// nudgeCheckpoints asks the flusher for a checkpoint pass; never blocks.
func (b *Broker) nudgeCheckpoints() {
	select {
	case b.checkpointDue <- struct{}{}:
	default:
	}
}

// registerCollectors adds the collectors of Config.Collectors; one that
// clashes with a broker metric is a programming error, reported as an
// error rather than a panic.
func registerCollectors(registry *prometheus.Registry, extra []prometheus.Collector) error {
	for _, collector := range extra {
		if err := registry.Register(collector); err != nil {
			return fmt.Errorf("broker: Config.Collectors: %w", err)
		}
	}
	return nil
}
