package segment

import (
	"errors"
	"fmt"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/format"
)

// Offline inspection of single files, for tools that must not open the
// directory (a broker holds its lock): backup copies a live directory and
// scrub checks one. They judge each file exactly as recovery and the
// first-read validation would, from its bytes alone.

// SegmentCheck is what InspectSegment found in one segment image.
type SegmentCheck struct {
	Base uint64 `json:"base_offset"`
	// Sealed: the image ends with a footer that checks out.
	Sealed bool `json:"sealed"`
	// NextOffset is one past the last offset the intact frames cover.
	NextOffset uint64 `json:"next_offset"`
	Records    uint64 `json:"records"`
	// ValidEnd is where the intact frames end: everything a restart would
	// keep lies in [0, ValidEnd) (for a sealed image, the whole file).
	ValidEnd int64 `json:"valid_end"`
	// Events are the damaged regions and the torn tail, as recovery would
	// report them.
	Events []LossEvent `json:"events"`
}

// HasDamage reports whether any event is data loss (a torn tail is not).
func (c SegmentCheck) HasDamage() bool {
	for _, event := range c.Events {
		if event.DataLoss {
			return true
		}
	}
	return false
}

// ParseSegmentFileName returns the base offset a segment file name
// encodes, and false for any other file.
func ParseSegmentFileName(name string) (uint64, bool) { return parseSegmentFileName(name) }

// InspectSegment checks the image of the segment file name of log id. last says
// whether it is the newest segment of its log, the only one that may end
// in a torn tail; an older segment without a footer is damaged after its
// intact frames. An unreadable header wraps ErrCorruptSegment, a file of
// another log or misnamed ErrInconsistent, a newer format ErrTooNew.
func InspectSegment(id LogID, name string, image []byte, last bool) (SegmentCheck, error) {
	base, ok := parseSegmentFileName(name)
	if !ok {
		return SegmentCheck{}, fmt.Errorf("%w: %s is not a segment file name", ErrInconsistent, name)
	}
	check := SegmentCheck{Base: base, NextOffset: base, Events: []LossEvent{}}
	if len(image) < format.SegmentDataStart {
		return check, fmt.Errorf("%w: %s holds %d bytes, shorter than a segment header block", ErrCorruptSegment, name, len(image))
	}
	header, err := format.DecodeSegmentHeader(image[:format.SegmentHeaderSize])
	switch {
	case errors.Is(err, format.ErrTooNew):
		return check, fmt.Errorf("%w: %s: %w", ErrTooNew, name, err)
	case err != nil:
		return check, fmt.Errorf("%w: %s: %w", ErrCorruptSegment, name, err)
	case header.BaseOffset != base:
		return check, fmt.Errorf("%w: %s says its base offset is %d", ErrInconsistent, name, header.BaseOffset)
	case header.StreamHash != format.StreamHash(id.Stream) || header.Partition != id.Partition:
		return check, fmt.Errorf("%w: %s belongs to another log (stream hash %016x partition %d)", ErrInconsistent, name, header.StreamHash, header.Partition)
	}
	limits := scanLimits{End: int64(len(image)), TornAllowed: last}
	if footer, ok := trailingFooter(image, header); ok {
		limits = scanLimits{End: int64(footer.DataEnd), Sealed: true, SealedNext: footer.NextOffset}
		check.Sealed = true
	}
	result := scanSegment(image, header.Token, base, record.DefaultMaxBody, limits)
	if result.TooNew != nil {
		return check, fmt.Errorf("%w: %s: %w", ErrTooNew, name, result.TooNew)
	}
	check.NextOffset, check.Records, check.ValidEnd = result.NextOffset, result.Records, result.End
	if check.Sealed {
		check.ValidEnd = int64(len(image))
	} else if result.Footer != nil {
		check.Sealed = true
		check.ValidEnd = result.End + format.FooterFrameSize
	}
	for _, d := range result.Damage {
		check.Events = append(check.Events, newEvent(d.Reason, name, d.Start, d.End, d.FirstLost, d.LostCount, d.Detail))
	}
	if torn := result.Torn; torn != nil {
		check.Events = append(check.Events, newEvent(torn.Reason, name, torn.Start, torn.End, 0, 0, torn.Detail))
	}
	if !last && !check.Sealed && len(result.Damage) == 0 && result.End < int64(len(image)) {
		// An older segment must end in its footer: a missing one means
		// the seal was lost (recovery reseals it; nothing is lost).
		check.Events = append(check.Events, newEvent(ReasonCorruptFooter, name, result.End, int64(len(image)), 0, 0,
			"segment has a successor but no intact footer"))
	}
	return check, nil
}

// trailingFooter returns the footer that ends image, when it belongs to
// this segment and sits where its own data-end field says.
func trailingFooter(image []byte, header format.SegmentHeader) (format.Footer, bool) {
	size := int64(len(image))
	if size < format.SegmentDataStart+format.FooterFrameSize {
		return format.Footer{}, false
	}
	footer, err := format.DecodeFooter(image[size-format.FooterFrameSize:])
	if err != nil || footer.Token != header.Token || footer.BaseOffset != header.BaseOffset ||
		int64(footer.DataEnd) != size-format.FooterFrameSize {
		return format.Footer{}, false
	}
	return footer, true
}

// CheckpointSuffix ends the file name of every checkpoint; a file in a
// log's checkpoints/ directory without it (a crashed write's temporary
// file) is not a checkpoint.
const CheckpointSuffix = checkpointSuffix

// CheckpointDirName is the directory beside a log's segments that holds
// its checkpoints.
const CheckpointDirName = checkpointDirName

// KeyIndexDirName is the directory beside a log's segments that holds its
// subject index (package keyindex): derived from the log, rebuilt from it,
// never read by recovery, backup or scrub.
const KeyIndexDirName = "keyindex"

// InspectCheckpoint checks the image of a checkpoint file: magic, length,
// version and CRC. It returns the payload, or an error wrapping
// ErrCorruptCheckpoint or ErrTooNew.
func InspectCheckpoint(name string, image []byte) ([]byte, error) {
	return decodeCheckpoint(image, name)
}

// ErrCorruptSegment reports a segment file whose header block is
// unreadable, found by InspectSegment.
var ErrCorruptSegment = errors.New("segment: segment header is corrupt")
