package brokertime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/segment/format"
	"github.com/ironbus/ironbus/segment/vfs"
)

// FileName is the floor file's name in the data directory.
const FileName = "clock"

const (
	fileMagic   = "IRONTIME"
	fileVersion = 1
	fileSize    = 28
	flagClean   = 1 // the floor was written by Close
	// DefaultPersistEvery is how often the floor is rewritten while the
	// broker runs, and so how far ahead of it a restart starts.
	DefaultPersistEvery = time.Second
)

// ErrClockFile marks a floor file that is damaged, torn, or newer than
// this binary understands; broker time then starts from zero.
var ErrClockFile = errors.New("brokertime: clock file")

// Options configure a Clock; the zero value is the real clock.
type Options struct {
	// Source is the monotonic clock (SystemSource when nil).
	Source Source
	// PersistEvery is how often the floor is persisted (1 s when zero).
	PersistEvery time.Duration
	// Logger reports a damaged floor file and failed rewrites.
	Logger *slog.Logger
	// ReadOnly reads the floor and never writes it (a data directory
	// opened for inspection).
	ReadOnly bool
}

// Clock is broker time. Now is safe for concurrent use and never
// allocates.
type Clock struct {
	fs     vfs.FS
	file   string
	source Source
	every  time.Duration
	logger *slog.Logger

	base   time.Duration // broker time at origin
	origin time.Duration // the source's reading at open
	high   atomic.Int64  // the latest time handed out: Now never returns less

	persistMu sync.Mutex // one floor write at a time
	readOnly  bool
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open reads the floor kept in dir, persists the time this run starts
// at, and starts rewriting the floor every PersistEvery. A missing floor
// starts broker time at zero; a damaged one too, reported to the logger.
// A floor that cannot be written (a full disk) is reported and retried
// every PersistEvery: the broker always starts, and a clock that then
// restarts from an older floor only counts durations longer, never
// shorter (a window remembers longer, nothing expires early).
func Open(fsys vfs.FS, dir string, opts Options) (*Clock, error) {
	if opts.Source == nil {
		opts.Source = SystemSource()
	}
	if opts.PersistEvery <= 0 {
		opts.PersistEvery = DefaultPersistEvery
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Clock{fs: fsys, file: path.Join(dir, FileName), source: opts.Source, every: opts.PersistEvery, logger: opts.Logger, readOnly: opts.ReadOnly,
		stop: make(chan struct{}), done: make(chan struct{})}
	floor, clean, err := readFloor(fsys, c.file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		c.logger.Error("the broker clock's floor is unreadable: broker time restarts from zero", "file", c.file, "error", err.Error())
	case clean:
		c.base = floor // Close wrote the last time it handed out
	default:
		// The previous run may have run up to one interval past its
		// last floor: start beyond anything it can have handed out.
		c.base = floor + c.every
	}
	c.origin = c.source.Elapsed()
	c.high.Store(int64(c.base))
	if opts.ReadOnly {
		close(c.done)
		return c, nil
	}
	if err := c.Persist(); err != nil {
		c.logger.Error("the broker clock's floor could not be written; retrying every interval", "file", c.file, "error", err.Error())
	}
	go c.persistLoop()
	return c, nil
}

// Now returns broker time: never less than any value it returned before,
// in this run or an earlier one.
func (c *Clock) Now() time.Duration {
	now := int64(c.base + c.source.Elapsed() - c.origin)
	for {
		high := c.high.Load()
		if now <= high {
			return time.Duration(high)
		}
		if c.high.CompareAndSwap(high, now) {
			return time.Duration(now)
		}
	}
}

// Persist writes the current time as the floor, crash-safely (temporary
// file, sync, rename, sync the directory).
func (c *Clock) Persist() error { return c.persist(false) }

// persist writes the floor; clean marks the last one, written at Close
// once nothing reads the clock for the data directory any more, so the
// next run starts from it exactly.
func (c *Clock) persist(clean bool) error {
	c.persistMu.Lock()
	defer c.persistMu.Unlock()
	if err := vfs.WriteFileAtomic(c.fs, c.file, encodeFloor(c.Now(), clean)); err != nil {
		return fmt.Errorf("%w: persisting the floor: %w", ErrClockFile, err)
	}
	return nil
}

func (c *Clock) persistLoop() {
	defer close(c.done)
	ticker := time.NewTicker(c.every)
	defer ticker.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-ticker.C:
			if r, ok := c.source.(refresher); ok {
				r.refresh()
			}
			if err := c.Persist(); err != nil {
				c.logger.Warn("the broker clock's floor was not persisted", "error", err.Error())
			}
		}
	}
}

// Close stops the rewrites and persists the floor a last time, marked
// clean: the next run continues from it without a step. Call it last,
// once the broker's timed state is closed; Now keeps working after it,
// but times it hands out then may be handed out again by the next run.
func (c *Clock) Close() error {
	c.closeOnce.Do(func() {
		if c.readOnly {
			return
		}
		close(c.stop)
		<-c.done
		c.closeErr = c.persist(true)
	})
	return c.closeErr
}

// encodeFloor returns the file image of a floor.
func encodeFloor(floor time.Duration, clean bool) []byte {
	buf := make([]byte, fileSize)
	copy(buf, fileMagic)
	binary.LittleEndian.PutUint32(buf[8:], fileVersion)
	if clean {
		binary.LittleEndian.PutUint32(buf[12:], flagClean)
	}
	binary.LittleEndian.PutUint64(buf[16:], uint64(floor))
	binary.LittleEndian.PutUint32(buf[24:], format.CRC(buf[:24]))
	return buf
}

// decodeFloor reads a file image, refusing anything torn, damaged or
// newer than this binary understands.
func decodeFloor(data []byte) (floor time.Duration, clean bool, err error) {
	switch {
	case len(data) != fileSize:
		return 0, false, fmt.Errorf("%w: %d bytes, want %d", ErrClockFile, len(data), fileSize)
	case string(data[:8]) != fileMagic:
		return 0, false, fmt.Errorf("%w: bad magic", ErrClockFile)
	case binary.LittleEndian.Uint32(data[24:]) != format.CRC(data[:24]):
		return 0, false, fmt.Errorf("%w: checksum mismatch", ErrClockFile)
	case binary.LittleEndian.Uint32(data[8:]) != fileVersion:
		return 0, false, fmt.Errorf("%w: version %d is newer than this binary understands", ErrClockFile, binary.LittleEndian.Uint32(data[8:]))
	}
	value := binary.LittleEndian.Uint64(data[16:])
	if value > 1<<62 {
		return 0, false, fmt.Errorf("%w: floor %d ns out of range", ErrClockFile, value)
	}
	return time.Duration(value), binary.LittleEndian.Uint32(data[12:])&flagClean != 0, nil
}

func readFloor(fsys vfs.FS, file string) (time.Duration, bool, error) {
	data, err := vfs.ReadFile(fsys, file)
	if err != nil {
		return 0, false, err
	}
	return decodeFloor(data)
}
