package load

import (
	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/ironbus/ironbus/benchrig/brokerproc"
	"github.com/ironbus/ironbus/benchrig/floor"
	"github.com/ironbus/ironbus/client"
)

// Schema names Result's JSON object; a field is never renamed or
// repurposed, new ones are added.
const Schema = "ironbus.cli.bench.v1"

// Result is a run's figures: flat, one number per field. Latencies are in
// microseconds.
type Result struct {
	Schema          string  `json:"schema"`
	Mode            string  `json:"mode"`
	Broker          string  `json:"broker"` // "started" or "live"
	BrokerProfile   string  `json:"broker_profile,omitempty"`
	Durability      string  `json:"durability"`
	TLS             bool    `json:"tls"` // the load's connections speak TLS
	Producers       int     `json:"producers"`
	Consumers       int     `json:"consumers"`
	PubWindow       int     `json:"pubwindow"`
	PayloadBytes    int     `json:"payload_bytes"`
	Compression     string  `json:"compression"`
	PayloadFile     string  `json:"payload_file,omitempty"`
	ConsumeTier     string  `json:"consume_tier,omitempty"`
	Idempotence     string  `json:"idempotence"` // "on" or "off": what the producers asked for
	MessageIDs      bool    `json:"msg_id"`      // every record carried a unique message id
	Records         uint64  `json:"records"`
	Seconds         float64 `json:"seconds"`
	MsgsPerSec      float64 `json:"msgs_per_sec"`
	MBPerSec        float64 `json:"mb_per_sec"`
	AckP50          float64 `json:"ack_p50_us"`
	AckP99          float64 `json:"ack_p99_us"`
	AckP999         float64 `json:"ack_p999_us"`
	AckMax          float64 `json:"ack_max_us"`
	ConsumedRecords uint64  `json:"consumed_records,omitempty"`
	ConsumeSeconds  float64 `json:"consume_seconds,omitempty"`
	ConsumePerSec   float64 `json:"consume_msgs_per_sec,omitempty"`
	Subjects        int     `json:"subjects,omitempty"`
	Filter          string  `json:"filter,omitempty"`
	FilterSparse    int     `json:"filter_sparse,omitempty"`
	// With a filter, ConsumedRecords counts the matching records delivered
	// and TraversedRecords those plus the ones the filter skipped.
	TraversedRecords uint64  `json:"traversed_records,omitempty"`
	TraversePerSec   float64 `json:"traversed_per_sec,omitempty"`
	E2EP50           float64 `json:"e2e_p50_us,omitempty"`
	E2EP99           float64 `json:"e2e_p99_us,omitempty"`
	E2EP999          float64 `json:"e2e_p999_us,omitempty"`
	E2EMax           float64 `json:"e2e_max_us,omitempty"`
	// The broker's own figures (AddBrokerUsage); 0 for a live broker.
	Fsyncs          uint64  `json:"fsyncs"`
	FsyncsPerSec    float64 `json:"fsyncs_per_sec"`
	RecordsPerFsync float64 `json:"records_per_fsync"`
	RSSBytes        int64   `json:"rss_bytes"`
	// DiskPerPayload is the write amplification: bytes the broker process
	// wrote to disk per payload byte published.
	DiskPerPayload float64 `json:"disk_bytes_per_payload_byte"`
	// CommitLinger is the started broker's --commit-linger ("" for none).
	CommitLinger string `json:"commit_linger,omitempty"`

	// The floors measured around the run (AddFloor; bench --floor): the
	// TCP floor (a minimal TCP server that fdatasyncs each message before
	// answering, one message in flight) and the raw write + fdatasync
	// loop, on the disk the broker wrote to, and the run's rate as a
	// ratio of each.
	FloorTCPPerSec  float64 `json:"floor_tcp_msgs_per_sec,omitempty"`
	FloorTCPP50     float64 `json:"floor_tcp_p50_us,omitempty"`
	FloorTCPP99     float64 `json:"floor_tcp_p99_us,omitempty"`
	FloorRawPerSec  float64 `json:"floor_raw_syncs_per_sec,omitempty"`
	FloorRawP50     float64 `json:"floor_raw_p50_us,omitempty"`
	FloorRawP99     float64 `json:"floor_raw_p99_us,omitempty"`
	RatioToTCPFloor float64 `json:"ratio_to_tcp_floor,omitempty"`
	RatioToRawDisk  float64 `json:"ratio_to_raw_disk,omitempty"`

	ack, e2e *hdrhistogram.Histogram
}

// newLatencyHistogram covers 1 µs to 60 s at 3 significant digits.
func newLatencyHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000, 3) }

// describe copies the run's configuration into r.
func (r *Result) describe(config *Config) {
	r.Schema, r.Mode, r.Durability = Schema, string(config.Mode), config.Durability
	if config.CommitLinger > 0 {
		r.CommitLinger = config.CommitLinger.String()
	}
	r.Producers, r.PubWindow, r.PayloadBytes = config.Producers, config.Window, config.PayloadBytes
	r.Broker, r.BrokerProfile, r.TLS = config.Broker, config.BrokerProfile, config.Connect.TLS != nil
	r.Compression, r.PayloadFile = config.Payloads.Compression.String(), config.Payloads.File
	if config.Mode != Publish {
		r.Consumers, r.ConsumeTier = config.Consumers, string(config.Tier)
	}
	r.Subjects, r.FilterSparse = config.Subjects.Count, config.Subjects.Sparse
	r.Idempotence, r.MessageIDs = "on", config.MessageIDs
	if config.Idempotence == client.IdempotenceOff {
		r.Idempotence = "off"
	}
	r.Filter = config.Subjects.ConsumerFilter()
}

// figure derives the rates and percentiles from what the run counted.
func (r *Result) figure() {
	if r.Seconds > 0 {
		r.MsgsPerSec = float64(r.Records) / r.Seconds
		r.MBPerSec = r.MsgsPerSec * float64(r.PayloadBytes) / 1e6
	}
	if r.ConsumeSeconds > 0 {
		r.ConsumePerSec = float64(r.ConsumedRecords) / r.ConsumeSeconds
		r.TraversePerSec = float64(r.TraversedRecords) / r.ConsumeSeconds
	}
	r.AckP50, r.AckP99, r.AckP999, r.AckMax = percentiles(r.ack)
	r.E2EP50, r.E2EP99, r.E2EP999, r.E2EMax = percentiles(r.e2e)
}

// AddBrokerUsage folds in what was read of the broker process, and the
// figures that relate it to the load: fdatasyncs a second, records per
// fdatasync, and disk bytes written per payload byte.
func (r *Result) AddBrokerUsage(usage brokerproc.Usage) {
	r.Fsyncs, r.RSSBytes = usage.Fsyncs, usage.PeakRSSBytes
	if r.Seconds > 0 {
		r.FsyncsPerSec = float64(r.Fsyncs) / r.Seconds
	}
	if r.Fsyncs > 0 {
		r.RecordsPerFsync = float64(r.Records) / float64(r.Fsyncs)
	}
	if payload := int64(r.Records) * int64(r.PayloadBytes); payload > 0 && usage.DiskWriteBytes > 0 {
		r.DiskPerPayload = float64(usage.DiskWriteBytes) / float64(payload)
	}
}

// AddFloor folds in the floors measured around the run and the run's
// publish rate as a ratio of each.
func (r *Result) AddFloor(floors floor.Result) {
	r.FloorTCPPerSec, r.FloorTCPP50, r.FloorTCPP99 = floors.TCPPerSec, floors.TCPP50, floors.TCPP99
	r.FloorRawPerSec, r.FloorRawP50, r.FloorRawP99 = floors.RawPerSec, floors.RawP50, floors.RawP99
	if floors.TCPPerSec > 0 {
		r.RatioToTCPFloor = r.MsgsPerSec / floors.TCPPerSec
	}
	if floors.RawPerSec > 0 {
		r.RatioToRawDisk = r.MsgsPerSec / floors.RawPerSec
	}
}

func percentiles(h *hdrhistogram.Histogram) (p50, p99, p999, maximum float64) {
	if h == nil || h.TotalCount() == 0 {
		return 0, 0, 0, 0
	}
	return float64(h.ValueAtQuantile(50)), float64(h.ValueAtQuantile(99)), float64(h.ValueAtQuantile(99.9)), float64(h.Max())
}
