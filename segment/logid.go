package segment

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// DefaultStream is the name of the stream verbs use when none is given. It
// is an ordinary stream: nothing about it is special.
const DefaultStream = "default"

// MaxStreamNameLength bounds a stream name in bytes.
const MaxStreamNameLength = 128

// LogID addresses one log: a partition of a stream. Every appender, reader
// and (later) consumer group and replica is keyed by it.
type LogID struct {
	Stream    string
	Partition uint32
}

func (id LogID) String() string { return fmt.Sprintf("%s/%d", id.Stream, id.Partition) }

// ValidateStreamName checks a stream name: 1 to 128 bytes of letters,
// digits, '-', '_' and '.', not starting with '.' (so it is always a safe
// directory name).
func ValidateStreamName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxStreamNameLength:
		return fmt.Errorf("%w: %d bytes (maximum %d)", ErrInvalidName, len(name), MaxStreamNameLength)
	case name[0] == '.':
		return fmt.Errorf("%w: %q starts with '.'", ErrInvalidName, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: %q has %q at byte %d; use letters, digits, '-', '_' or '.'", ErrInvalidName, name, c, i)
		}
	}
	return nil
}

// Directory layout under the data directory (see docs/FORMAT.md).
const (
	streamsDirName    = "streams"
	quarantineDirName = "quarantine"
	formatFileName    = "FORMAT"
	reportFileName    = "recovery-report.json"
	ownerFileName     = "OWNER"
	segmentSuffix     = ".seg"
	prepareSuffix     = ".prepare"
	offsetDigits      = 20
)

// LogPath is the directory of a log's files in the data directory root;
// other packages keep state of their own for the log beside it.
func LogPath(root string, id LogID) string { return logDir(root, id) }

func logDir(root string, id LogID) string {
	return path.Join(root, streamsDirName, id.Stream, strconv.FormatUint(uint64(id.Partition), 10))
}

// segmentFileName names a segment by its base offset, zero padded so that
// lexical order is offset order.
func segmentFileName(base uint64) string {
	return fmt.Sprintf("%0*d%s", offsetDigits, base, segmentSuffix)
}

// parseSegmentFileName returns the base offset a segment file name encodes.
func parseSegmentFileName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != offsetDigits {
		return 0, false
	}
	base, err := strconv.ParseUint(digits, 10, 64)
	return base, err == nil
}
