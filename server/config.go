package server

import (
	"github.com/ironbus/ironbus/dedup"
	"io"
	"time"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/consumer"
	"github.com/ironbus/ironbus/loop"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/session"
	"github.com/ironbus/ironbus/txn"
	"github.com/ironbus/ironbus/wire"
)

// Config is everything a broker runs with. Start from DefaultConfig and
// change what you need: the zero value of a field is not its default, and
// Validate refuses a numeric setting outside its bounds.
//
// Each field is one setting with three spellings: the field, the TOML key
// of `ironbus serve --config` (the name in brackets below) and the flag
// (the key with dashes: --segment-bytes). Errors name the flag spelling.
// Bounds are inclusive; docs/CONFIG.md has the same table.
type Config struct {
	// ---- Listening

	// Addr is where clients connect [addr] ("127.0.0.1:7777"; port 0 picks
	// a free one). A non-loopback address needs TLS and authentication,
	// or authentication and InsecurePlaintextWire.
	Addr string
	// HealthAddr serves /healthz, /readyz, /metrics and /admin
	// [health_addr]: a loopback host:port, any host:port with
	// HealthTokenFile, or "" or "off" for none.
	HealthAddr string
	// HealthTokenFile holds the bearer token every request to the health
	// endpoints must carry [health_token_file] (mode 0600, like every
	// secret file); required to bind HealthAddr beyond loopback.
	HealthTokenFile string
	// HealthHosts are host names the health endpoints answer besides the
	// loopback ones [health_hosts]: a request whose Host header names
	// anything else is refused (DNS rebinding, docs/SECURITY.md).
	HealthHosts []string
	// Loop is the network backend [loop]: auto, uring, epoll or std.
	Loop string
	// InsecurePlaintextWire consents to a non-loopback Addr without TLS
	// [insecure_plaintext_wire]; it still needs AuthConfig.
	InsecurePlaintextWire bool
	// MaxConnections bounds connections served at once
	// [max_connections]: 1 to 65,536.
	MaxConnections int

	// ---- Storage

	// DataDir is the data directory [data_dir]; it is created when
	// missing, and must not be a file. Required with Storage "disk".
	DataDir string
	// Storage is where logs live [storage]: "disk", or "memory" (RAM only,
	// lost at every stop; needs AcceptMemoryStorageLoss and
	// MemoryStorageCap, and no DataDir).
	Storage string
	// AcceptMemoryStorageLoss consents to Storage "memory"
	// [accept_memory_storage_loss].
	AcceptMemoryStorageLoss bool
	// MemoryStorageCap bounds the bytes Storage "memory" holds
	// [memory_storage_cap]: 0 (disk storage) to 1 TiB; it must hold two
	// segments.
	MemoryStorageCap int64
	// Durability is when a produce is acknowledged [durability]: sync
	// (after fdatasync), interval or none (both need
	// AcceptRelaxedDurability).
	Durability string
	// AcceptRelaxedDurability consents to Durability interval or none
	// [accept_relaxed_durability]: a power cut loses acknowledged records.
	AcceptRelaxedDurability bool
	// CommitLinger is how long a busy stream's fdatasync may wait to
	// gather more records [commit_linger]: 0 (never waits) to 100 ms.
	// Fewer syncs rewrite fewer flash pages; each record's ack may come
	// up to this much later, and still only after its fdatasync
	// (docs/DURABILITY.md). Only with Durability sync.
	CommitLinger time.Duration
	// IOMode is how segments are written [io_mode]: buffered, direct or
	// auto.
	IOMode string
	// SegmentBytes is the size at which a segment is sealed
	// [segment_bytes]: 64 KiB to 1 GiB.
	SegmentBytes int64
	// StagingBytes is what a stream buffers while its previous batch is
	// written [staging_bytes]: 4 KiB to 256 MiB.
	StagingBytes int64
	// MaxBatchRecords bounds the records of one atomic batch
	// [max_batch_records]: 1 to 65,536.
	MaxBatchRecords int
	// MaxBatchBytes bounds the record bytes of one atomic batch
	// [max_batch_bytes]: 0 (1 MiB, or less when one staging buffer or
	// one segment holds less) to 256 MiB; never more than one staging
	// buffer and one segment hold.
	MaxBatchBytes int64

	// ---- Memory (docs/MEMORY.md)

	// RAMCeiling refuses to start unless the RAM budget fits, and sets
	// the Go runtime's memory limit [ram_ceiling]: 0 (no ceiling) to
	// 1 TiB. The memory limit is process-wide: one Server per process.
	RAMCeiling int64
	// MaxFrame is the largest frame a client may send [max_frame]:
	// 64 KiB to 1 GiB.
	MaxFrame int64
	// LargeFramePool is the memory shared by frames larger than the
	// 64 KiB read buffer [large_frame_pool]: 0 (two largest frames) or
	// at least MaxFrame + 64 KiB, at most 4 GiB.
	LargeFramePool int64
	// Window is the produce requests a connection may have
	// unacknowledged [window]: 1 to 1,048,576.
	Window int
	// ConnectionOutput is the reply bytes queued per connection before
	// it stops reading [connection_output]: 4 KiB to 1 GiB.
	ConnectionOutput int64
	// MaxStreams bounds the streams served [max_streams]: 1 to 65,536.
	MaxStreams int
	// MaxGroups bounds the consumer groups across all streams
	// [max_groups]: 1 to 65,536.
	MaxGroups int
	// MaxInFlight bounds the deliveries a group may have leased and
	// unacknowledged [max_in_flight]: 1 to 1,048,576.
	MaxInFlight int

	// ---- Consumers (docs/CONSUMERS.md)

	// ConsumeLongPoll is the longest an idle fetch waits for new durable
	// records [consume_longpoll_ms, in milliseconds]: 1 ms to 1 h.
	ConsumeLongPoll time.Duration
	// VisibilityTimeout is the default lease of a delivery to a work or
	// key-shared group [visibility_timeout]: 100 ms to 5 min (the lease
	// cap).
	VisibilityTimeout time.Duration
	// MaxDeliver is how many deliveries of a record precede its move to
	// the dead-letter queue [max_deliver]: 1 to 10,000.
	MaxDeliver int
	// CheckpointInterval is how often group cursors are persisted
	// [checkpoint_interval]: 10 ms to 1 min.
	CheckpointInterval time.Duration
	// NoAckShedBudget is how many fire-and-forget (no-ack) records per
	// second the broker may drop, counted, under overload instead of
	// holding their connections back [no_ack_shed_budget]: 0 (never) to
	// 10,000,000.
	NoAckShedBudget int
	// MaxOpenTxns bounds the transactions open at once [max_open_txns]:
	// 1 to 65,536 (about 100 bytes of RAM each; their records stay on
	// disk). A TxnBegin over it is answered busy.
	MaxOpenTxns int
	// DedupMaxIDs caps the message ids each partition remembers within
	// its stream's dedup window [dedup_max_ids]: 1,024 to 10,000,000;
	// beyond it the oldest are forgotten early, and counted. About 3.7
	// bytes of RAM per id (its Bloom filter bits and index) per stream,
	// plus fixed tables.
	DedupMaxIDs int
	// AutoCreateStreams creates a stream on its first publish
	// [auto_create_streams]; consume and admin requests never create one.
	AutoCreateStreams bool

	// ---- Retention and the disk budget (docs/RETENTION.md)

	// RetentionBytes keeps at most this many bytes per stream
	// [retention_bytes]: 0 (unbounded) to 1 PiB.
	RetentionBytes int64
	// RetentionAge deletes whole segments whose records are all older
	// [retention_age]: 0 (unbounded) to 100 years.
	RetentionAge time.Duration
	// RetentionRecords keeps at most this many records per stream
	// [retention_records]: 0 (unbounded) to 2^62.
	RetentionRecords uint64
	// RetentionPolicy decides what a bound does to records a group has
	// not committed [retention_policy]: consumer-safe or drop-oldest.
	RetentionPolicy string
	// GroupExpiry lets a group inactive this long stop holding retention
	// back [group_expiry]: 0 (never) to 100 years.
	GroupExpiry time.Duration
	// DLQRetention drops dead letters older than this [dlq_retention]:
	// 0 (keep forever) to 100 years.
	DLQRetention time.Duration
	// DLQRetentionBytes keeps at most this many bytes per dead-letter
	// queue [dlq_retention_bytes]: 0 (unbounded) to 1 PiB.
	DLQRetentionBytes int64
	// DiskBudget caps the whole data directory [disk_budget]: 0 (none) to
	// 1 PiB.
	DiskBudget int64
	// DiskHeadroom is the part of DiskBudget kept free for checkpoints
	// and recovery [disk_headroom]: 0 (5 % of the budget, at least two
	// segments) to 1 PiB; it needs DiskBudget.
	DiskHeadroom int64
	// DiskFullPolicy is what happens at the disk budget
	// [disk_full_policy]: drop-new or drop-oldest.
	DiskFullPolicy string
	// RetentionInterval is how often retention runs
	// [retention_interval]: 100 ms to 24 h.
	RetentionInterval time.Duration

	// ---- Security (docs/SECURITY.md)

	// TLSCert and TLSKey serve TLS 1.3 [tls_cert, tls_key]; the key file
	// must not be readable by group or others.
	TLSCert string
	TLSKey  string
	// TLSClientCA requires client certificates signed by these CAs
	// [tls_client_ca].
	TLSClientCA string
	// AuthConfig is the identities and scopes file [auth_config]; it must
	// not be readable by group or others.
	AuthConfig string
	// EncryptionKeyFile is the key ring (`ironbus key create`, mode 0600)
	// whose active key seals every record body written from then on
	// [encryption_key_file]; a data directory written with encryption
	// refuses to open without it.
	EncryptionKeyFile string
	// AuditLog appends auth outcomes and admin actions to this file
	// [audit_log].
	AuditLog string
	// AuditMaxBytes rotates the audit log [audit_max_bytes]: 4 KiB to
	// 1 TiB.
	AuditMaxBytes int64
	// AuditKeep is how many rotated audit files are kept [audit_keep]:
	// 1 to 1,000. The trail holds at most AuditMaxBytes × (AuditKeep+1).
	AuditKeep int
	// SecurityReloadInterval is how often the TLS and auth files are
	// checked for changes [security_reload_interval]: 10 ms to 24 h.
	SecurityReloadInterval time.Duration
	// MaxHalfOpen bounds connections accepted but not through Hello
	// [max_half_open]: 1 to 65,536. At the cap the oldest of them is
	// closed to admit a new one.
	MaxHalfOpen int
	// MaxHalfOpenPerSource bounds them per source IP
	// [max_half_open_per_source]: 1 to 65,536; at it, a source's new
	// connection closes that source's own oldest.
	MaxHalfOpenPerSource int
	// ConnectionRate is the new connections per second per source IP,
	// burst twice that [connection_rate]: 0.01 to 1,000,000.
	ConnectionRate float64
	// AuthLockoutAfter is the failed authentications from one source
	// before it is locked out [auth_lockout_after]: 1 to 1,000.
	AuthLockoutAfter int
	// AuthFailureDelay is waited before answering a failed
	// authentication [auth_failure_delay]: 1 ms to 10 s.
	AuthFailureDelay time.Duration

	// ---- Cluster (docs/CLUSTER.md)

	// NodeID makes this broker a member of a cluster [node_id]: 0 (a
	// single node) or the node's id, unique in the cluster.
	NodeID uint32
	// ClusterAddr is where the other nodes reach this one [cluster_addr]:
	// the peer link and the metadata group share it. Required with NodeID.
	ClusterAddr string
	// Peers are the cluster's founding members, node id to cluster address
	// [peers], this node included (`--peer 1=127.0.0.1:8001`, one per
	// node). Every node is started with the same list.
	Peers map[uint32]string
	// ClusterName names the cluster [cluster_name] ("ironbus"): a node
	// refuses peers of another cluster.
	ClusterName string
	// InsecurePlaintextCluster consents to non-loopback cluster addresses
	// without TLS [insecure_plaintext_cluster]: peers then trust the
	// network with every record.
	InsecurePlaintextCluster bool

	// ---- Logging and identity

	// LogLevel is debug, info, warn or error [log_level]; Reload changes
	// it while running.
	LogLevel string
	// LogOutput receives the log (nil: discarded); LogJSON writes one
	// JSON object per line instead of text.
	LogOutput io.Writer
	LogJSON   bool
	// Version is reported to clients and in the log ("devel" when empty).
	Version string
	// Owner names this process in the data directory's lock, so a second
	// broker's refusal says who holds it ("ironbus server" when empty;
	// the pid and Addr are added).
	Owner string
}

// Defaults of the settings that have one outside their package.
const (
	// DefaultAddr is loopback, so a fresh install exposes nothing.
	DefaultAddr = "127.0.0.1:7777"
	// DefaultHealthAddr is where the health endpoints listen.
	DefaultHealthAddr = "127.0.0.1:7778"
	// DefaultNoAckShedBudget lets an overloaded broker drop up to 10,000
	// fire-and-forget records a second rather than slow their producers.
	DefaultNoAckShedBudget = 10_000
	// DefaultClusterName is the cluster's name when none is given.
	DefaultClusterName = "ironbus"
	// HealthOff turns the health endpoints off.
	HealthOff = "off"
)

// DefaultConfig returns every setting at its default: a durable broker
// on loopback, the "balanced" profile of docs/CONFIG.md. DataDir is
// empty: the caller names one.
func DefaultConfig() Config {
	return Config{
		Addr:                   DefaultAddr,
		HealthAddr:             DefaultHealthAddr,
		Loop:                   loop.BackendAuto,
		MaxConnections:         broker.DefaultMaxConnections,
		Storage:                StorageDisk,
		Durability:             "sync",
		IOMode:                 "buffered",
		SegmentBytes:           segment.DefaultSegmentSize,
		StagingBytes:           segment.DefaultStagingBytes,
		MaxBatchRecords:        broker.DefaultMaxBatchRecords,
		MaxFrame:               wire.DefaultMaxFrame,
		Window:                 session.DefaultWindow,
		ConnectionOutput:       session.DefaultConnectionOutput,
		MaxStreams:             broker.DefaultMaxStreams,
		MaxGroups:              broker.DefaultMaxGroups,
		MaxInFlight:            consumer.DefaultMaxInFlight,
		ConsumeLongPoll:        session.DefaultMaxConsumeWait,
		VisibilityTimeout:      consumer.DefaultVisibility,
		MaxDeliver:             consumer.DefaultMaxDeliver,
		CheckpointInterval:     broker.DefaultCheckpointInterval,
		NoAckShedBudget:        DefaultNoAckShedBudget,
		ClusterName:            DefaultClusterName,
		MaxOpenTxns:            txn.DefaultMaxOpen,
		DedupMaxIDs:            dedup.DefaultMaxIDs,
		AutoCreateStreams:      true,
		RetentionPolicy:        broker.ConsumerSafe.String(),
		DLQRetention:           broker.DefaultDeadLetterRetention,
		DiskFullPolicy:         broker.DropNew.String(),
		RetentionInterval:      broker.DefaultRetentionCheck,
		AuditMaxBytes:          16 << 20,
		AuditKeep:              security.DefaultAuditKeep,
		SecurityReloadInterval: security.DefaultReloadInterval,
		MaxHalfOpen:            security.DefaultMaxHalfOpen,
		MaxHalfOpenPerSource:   security.DefaultMaxHalfOpenPerSource,
		ConnectionRate:         security.DefaultConnectionsPerSecond,
		AuthLockoutAfter:       security.DefaultLockoutAfter,
		AuthFailureDelay:       security.DefaultFailureDelay,
		LogLevel:               "info",
	}
}

// Storage kinds.
const (
	StorageDisk   = "disk"
	StorageMemory = "memory"
)
