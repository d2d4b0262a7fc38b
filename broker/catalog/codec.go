package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/segment/format"
)

// The file is one JSON object: an envelope naming the format, its
// version and the CRC32C of the body, with the body (the catalog) as
// the last member, byte for byte as it was checksummed:
//
//	{"format":"ironbus.streams","version":1,"crc32c":"1a2b3c4d",
//	 "catalog":{"streams":[...],"bindings":[...]}}
//
// JSON keeps the file readable by an operator with cat; the CRC makes a
// hand edit or bit rot a detected corruption rather than a silent change.
const (
	formatName = "ironbus.streams"
	// Version is the catalog format this package writes.
	Version = 1
	// MaxFileBytes bounds what Decode reads: a thousand streams with a
	// thousand bindings each stays far below it.
	MaxFileBytes = 64 << 20
)

type envelope struct {
	Format  string          `json:"format"`
	Version int             `json:"version"`
	CRC32C  string          `json:"crc32c"`
	Catalog json.RawMessage `json:"catalog"`
}

type fileCatalog struct {
	Streams  []fileStream  `json:"streams"`
	Bindings []fileBinding `json:"bindings"`
}

type fileStream struct {
	Name          string `json:"name"`
	Partitions    uint32 `json:"partitions"`
	MaxBytes      uint64 `json:"max_bytes,omitempty"`
	MaxAgeMs      int64  `json:"max_age_ms,omitempty"`
	MaxRecords    uint64 `json:"max_records,omitempty"`
	CreatedUnixMs int64  `json:"created_unix_ms,omitempty"`
	Owner         string `json:"owner,omitempty"`
	// DedupWindowMs: absent is the default window, 0 is off.
	DedupWindowMs *int64 `json:"dedup_window_ms,omitempty"`
	Compact       bool   `json:"compact,omitempty"`
	// DeleteRetentionMs keeps tombstones of a compacted stream; absent:
	// the broker's default.
	DeleteRetentionMs int64 `json:"delete_retention_ms,omitempty"`
	CompactPastGroups bool  `json:"compact_past_groups,omitempty"`
	Replicas          int   `json:"replicas,omitempty"`
}

type fileBinding struct {
	Pattern string `json:"pattern"`
	Stream  string `json:"stream"`
}

// Encode returns the file image of a valid catalog.
func Encode(c Catalog) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	body := fileCatalog{Streams: make([]fileStream, 0, len(c.Streams)), Bindings: make([]fileBinding, 0, len(c.Bindings))}
	for _, s := range c.Streams {
		fs := fileStream{Name: s.Name, Partitions: s.Partitions, MaxBytes: s.MaxBytes, MaxAgeMs: s.MaxAge.Milliseconds(), MaxRecords: s.MaxRecords, Owner: s.Owner}
		fs.Compact, fs.DeleteRetentionMs, fs.CompactPastGroups = s.Compact, s.DeleteRetention.Milliseconds(), s.CompactPastGroups
		fs.Replicas = s.Replicas
		if !s.Created.IsZero() {
			fs.CreatedUnixMs = s.Created.UnixMilli()
		}
		if s.DedupWindow != 0 {
			window := s.Dedup().Milliseconds()
			fs.DedupWindowMs = &window
		}
		body.Streams = append(body.Streams, fs)
	}
	for _, b := range c.Bindings {
		body.Bindings = append(body.Bindings, fileBinding(b))
	}
	raw, err := marshal(body)
	if err != nil {
		return nil, err
	}
	image, err := marshal(envelope{Format: formatName, Version: Version, CRC32C: fmt.Sprintf("%08x", format.CRC(raw)), Catalog: raw})
	if err != nil {
		return nil, err
	}
	return append(image, '\n'), nil
}

// marshal encodes without HTML escaping, so patterns read as typed
// ("orders.>", not "orders.\u003e") and the body's bytes survive being
// embedded in the envelope unchanged.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	encoder := json.NewEncoder(&buf)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(v); err != nil {
		return nil, fmt.Errorf("catalog: encoding: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Decode parses a file image: ErrCorrupt when it fails its checks,
// ErrTooNew for a newer format, ErrInvalid (wrapped in ErrCorrupt) when
// it decodes to a catalog that breaks an invariant.
func Decode(image []byte) (Catalog, error) {
	if len(image) > MaxFileBytes {
		return Catalog{}, fmt.Errorf("%w: %d bytes (maximum %d)", ErrCorrupt, len(image), MaxFileBytes)
	}
	var env envelope
	if err := json.Unmarshal(image, &env); err != nil {
		return Catalog{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if env.Format != formatName {
		return Catalog{}, fmt.Errorf("%w: format %q, want %q", ErrCorrupt, env.Format, formatName)
	}
	if env.Version > Version {
		return Catalog{}, fmt.Errorf("%w: catalog format version %d; this IronBus reads up to %d", ErrTooNew, env.Version, Version)
	}
	if env.Version < 1 {
		return Catalog{}, fmt.Errorf("%w: catalog format version %d", ErrCorrupt, env.Version)
	}
	if want := fmt.Sprintf("%08x", format.CRC(env.Catalog)); env.CRC32C != want {
		return Catalog{}, fmt.Errorf("%w: checksum %q, the body sums to %s", ErrCorrupt, env.CRC32C, want)
	}
	var body fileCatalog
	decoder := json.NewDecoder(bytes.NewReader(env.Catalog))
	if err := decoder.Decode(&body); err != nil {
		return Catalog{}, fmt.Errorf("%w: body: %v", ErrCorrupt, err)
	}
	c := Catalog{Streams: make([]Stream, 0, len(body.Streams)), Bindings: make([]Binding, 0, len(body.Bindings))}
	for _, s := range body.Streams {
		stream := Stream{Name: s.Name, Partitions: s.Partitions, MaxBytes: s.MaxBytes, MaxRecords: s.MaxRecords, Owner: s.Owner}
		if s.MaxAgeMs < 0 || s.MaxAgeMs > int64(time.Duration(1<<62)/time.Millisecond) {
			return Catalog{}, fmt.Errorf("%w: stream %q: max age %d ms out of range", ErrCorrupt, s.Name, s.MaxAgeMs)
		}
		stream.MaxAge = time.Duration(s.MaxAgeMs) * time.Millisecond
		if s.DedupWindowMs != nil {
			if *s.DedupWindowMs < 0 || *s.DedupWindowMs > MaxDedupWindow.Milliseconds() {
				return Catalog{}, fmt.Errorf("%w: stream %q: dedup window %d ms out of range", ErrCorrupt, s.Name, *s.DedupWindowMs)
			}
			stream.DedupWindow = time.Duration(*s.DedupWindowMs) * time.Millisecond
			if stream.DedupWindow == 0 {
				stream.DedupWindow = DedupOff
			}
		}
		if s.DeleteRetentionMs < 0 || s.DeleteRetentionMs > int64(time.Duration(1<<62)/time.Millisecond) {
			return Catalog{}, fmt.Errorf("%w: stream %q: delete retention %d ms out of range", ErrCorrupt, s.Name, s.DeleteRetentionMs)
		}
		stream.Compact, stream.DeleteRetention = s.Compact, time.Duration(s.DeleteRetentionMs)*time.Millisecond
		stream.CompactPastGroups = s.CompactPastGroups
		if s.Replicas < 0 || s.Replicas > 255 {
			return Catalog{}, fmt.Errorf("%w: stream %q: %d replicas out of range", ErrCorrupt, s.Name, s.Replicas)
		}
		stream.Replicas = s.Replicas
		if s.CreatedUnixMs != 0 {
			stream.Created = time.UnixMilli(s.CreatedUnixMs).UTC()
		}
		c.Streams = append(c.Streams, stream)
	}
	for _, b := range body.Bindings {
		c.Bindings = append(c.Bindings, Binding(b))
	}
	if err := c.Validate(); err != nil {
		return Catalog{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return c, nil
}
