package load

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ironbus/ironbus/client"
)

// Mode is what a run measures.
type Mode string

// The modes.
const (
	// Publish runs the producers alone.
	Publish Mode = "publish"
	// Subscribe stores the records first, then the consumers read them.
	Subscribe Mode = "subscribe"
	// RoundTrip runs producers and consumers at once.
	RoundTrip Mode = "round-trip"
)

// Tier is how the consumers read.
type Tier string

// The consume tiers.
const (
	// Work consumers share one group: leased fetches of 1,000 and acks.
	Work Tier = "work"
	// Streaming consumers each read everything through a group of their
	// own, committing a position per batch.
	Streaming Tier = "streaming"
)

// StampBytes is the send time every payload starts with (round-trip reads
// it back); payloads are at least this long.
const StampBytes = 8

// MaxPayloadFile bounds what ReadPayloadFile reads: payloads cycle through
// it, so a sample of real data is enough, and the load generator's RAM
// stays a function of its configuration.
const MaxPayloadFile = 64 << 20

// ErrInvalidConfig wraps a Config Run cannot load with.
var ErrInvalidConfig = errors.New("load: invalid configuration")

// ErrEmptyPayloadFile: a payload file holds no bytes to cut payloads from.
var ErrEmptyPayloadFile = errors.New("load: the payload file is empty")

// Config is one run.
type Config struct {
	Mode      Mode
	Producers int
	Consumers int // subscribe and round-trip
	// Window is the records in flight per producer (1: each publish
	// awaited).
	Window       int
	PayloadBytes int
	// Duration is how long the producers publish; Count, when above 0,
	// is instead the records they publish in all.
	Duration time.Duration
	Count    int
	// Rate makes the producers open-loop at this many records a second
	// over all of them; 0: as fast as acks allow.
	Rate     float64
	Tier     Tier
	Stream   string
	Subjects Subjects
	Payloads Payloads
	// Idempotence is what every producer does (client.ProducerOptions);
	// the zero value, on, is the SDK's default.
	Idempotence client.Idempotence
	// MessageIDs gives every record a message id of its own, unique in
	// the run, so the stream's dedup window checks and remembers each.
	MessageIDs bool
	// Connect holds the TLS and credentials of every connection.
	Connect client.Options

	// Describing the broker in the Result; the load does not use them.
	Broker        string // "started" or "live"
	BrokerProfile string
	Durability    string
	CommitLinger  time.Duration
}

func (c *Config) check() error {
	switch {
	case c.Mode != Publish && c.Mode != Subscribe && c.Mode != RoundTrip:
		return fmt.Errorf("%w: mode %q", ErrInvalidConfig, c.Mode)
	case c.Tier != Work && c.Tier != Streaming:
		return fmt.Errorf("%w: consume tier %q", ErrInvalidConfig, c.Tier)
	case c.Producers < 1 || c.Consumers < 1 || c.Window < 1:
		return fmt.Errorf("%w: producers, consumers and window must be at least 1", ErrInvalidConfig)
	case c.PayloadBytes < StampBytes:
		return fmt.Errorf("%w: payloads of %d bytes, want at least %d", ErrInvalidConfig, c.PayloadBytes, StampBytes)
	case c.Count < 0 || c.Rate < 0 || c.Duration < 0 || (c.Count == 0 && c.Duration == 0):
		return fmt.Errorf("%w: give a positive count or duration, and no negative rate", ErrInvalidConfig)
	}
	return nil
}

// Payloads is what the producers send: the codec, and the bytes payloads
// are cut from (nil: zeros).
type Payloads struct {
	Compression client.Compression
	Source      []byte
	// File names where Source came from, for the report.
	File string
}

// ReadPayloadFile reads up to MaxPayloadFile of path, a sample of the data
// a deployment publishes. Its errors are os.Open's and the read's
// (*fs.PathError, Op "open" or "read"), or ErrEmptyPayloadFile.
func ReadPayloadFile(path string) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	source, err := io.ReadAll(io.LimitReader(file, MaxPayloadFile))
	if err != nil {
		return nil, err
	}
	if len(source) == 0 {
		return nil, ErrEmptyPayloadFile
	}
	return source, nil
}

// fill writes the payload of one record: the next len(payload) bytes of
// the source, wrapping at its end, from position; it returns the position
// after them. Without a source the payload stays zeros.
func (p Payloads) fill(payload []byte, position int) int {
	if len(p.Source) == 0 {
		return 0
	}
	for written := 0; written < len(payload); {
		n := copy(payload[written:], p.Source[position:])
		written += n
		position = (position + n) % len(p.Source)
	}
	return position
}

// Describe names the payloads in a report.
func (p Payloads) Describe() string {
	if p.File == "" {
		return fmt.Sprintf("zero-filled payloads, compression %s", p.Compression)
	}
	return fmt.Sprintf("payloads from %s, compression %s", p.File, p.Compression)
}
