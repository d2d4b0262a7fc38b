package segment

import (
	"encoding/json"
	"fmt"
	"time"
)

// Reason says why bytes were dropped. The numeric codes are part of the
// recovery report format and never change meaning; new reasons get new
// codes.
type Reason uint32

// Reasons. Only ReasonTornTail is not data loss: a torn tail holds bytes
// written after the last covering sync, which were never acknowledged.
const (
	ReasonTornTail            Reason = 1 // unacknowledged bytes after the last intact commit frame
	ReasonCorruptRecordHeader Reason = 2 // a record header failed its checks inside committed data
	ReasonCorruptRecordBody   Reason = 3 // a record body failed its checksum inside committed data
	ReasonCorruptCommit       Reason = 4 // a batch failed its commit frame (CRC, count or token)
	ReasonCorruptSegmentHdr   Reason = 5 // a segment header is unreadable; the segment was quarantined
	ReasonMissingSegment      Reason = 6 // a segment file is missing from the chain
	ReasonOffsetMismatch      Reason = 7 // an intact record carried an unexpected offset
	ReasonCorruptFrame        Reason = 8 // unrecognisable bytes where a frame should start
	ReasonCorruptFooter       Reason = 9 // a segment footer was damaged; no record was lost
	// ReasonCorruptCheckpoint: a checkpoint (a group cursor) failed its
	// checks; no record was lost, its reader resumes from the previous
	// copy and sees some records again.
	ReasonCorruptCheckpoint Reason = 10
	// ReasonCompacted: compaction removed records a later record of the
	// same key superseded (or an expired tombstone); not a loss.
	ReasonCompacted Reason = 11
)

var reasonNames = map[Reason]string{
	ReasonTornTail:            "torn_tail",
	ReasonCorruptRecordHeader: "corrupt_record_header",
	ReasonCorruptRecordBody:   "corrupt_record_body",
	ReasonCorruptCommit:       "corrupt_commit",
	ReasonCorruptSegmentHdr:   "corrupt_segment_header",
	ReasonMissingSegment:      "missing_segment",
	ReasonOffsetMismatch:      "offset_mismatch",
	ReasonCorruptFrame:        "corrupt_frame",
	ReasonCorruptFooter:       "corrupt_footer",
	ReasonCorruptCheckpoint:   "corrupt_checkpoint",
	ReasonCompacted:           GapCompacted,
}

func (r Reason) String() string {
	if name, ok := reasonNames[r]; ok {
		return name
	}
	return fmt.Sprintf("reason_%d", uint32(r))
}

// IsDataLoss reports whether the reason means acknowledged data may be
// gone. A torn tail was never acknowledged; a damaged footer loses nothing.
func (r Reason) IsDataLoss() bool {
	return r != ReasonTornTail && r != ReasonCorruptFooter && r != ReasonCorruptCheckpoint && r != ReasonCompacted
}

// MarshalJSON writes the reason as its name.
func (r Reason) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

// UnmarshalJSON reads a reason name.
func (r *Reason) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		return err
	}
	for code, known := range reasonNames {
		if known == name {
			*r = code
			return nil
		}
	}
	return fmt.Errorf("segment: unknown loss reason %q", name)
}

// LossEvent is one bounded loss (or one torn tail) found in a log.
type LossEvent struct {
	Reason     Reason `json:"reason"`
	ReasonCode uint32 `json:"reason_code"`
	DataLoss   bool   `json:"data_loss"`
	Segment    string `json:"segment"`
	ByteStart  int64  `json:"byte_start"`
	ByteEnd    int64  `json:"byte_end"`
	Bytes      int64  `json:"bytes"`
	// Offsets lost: FirstOffset..LastOffset inclusive; Records is zero
	// when the damaged bytes held no record (then both are zero).
	FirstOffset uint64 `json:"first_offset"`
	LastOffset  uint64 `json:"last_offset"`
	Records     uint64 `json:"records"`
	// MaybeUnacknowledged is set when the commit frames after the damage
	// say none of the lost offsets had been acknowledged yet when they
	// were written: a hint, not a guarantee.
	MaybeUnacknowledged bool   `json:"maybe_unacknowledged,omitempty"`
	Quarantine          string `json:"quarantine,omitempty"`
	Detail              string `json:"detail"`
	// Applied is false when the event was found but nothing was changed
	// on disk (read-only open, or caps exceeded).
	Applied bool `json:"applied"`
}

func newEvent(reason Reason, segment string, start, end int64, first, records uint64, detail string) LossEvent {
	ev := LossEvent{Reason: reason, ReasonCode: uint32(reason), DataLoss: reason.IsDataLoss(),
		Segment: segment, ByteStart: start, ByteEnd: end, Bytes: end - start,
		Records: records, Detail: detail}
	if records > 0 {
		ev.FirstOffset, ev.LastOffset = first, first+records-1
	}
	return ev
}

// LogReport is what recovery (or verify) found in one log.
type LogReport struct {
	Stream    string `json:"stream"`
	Partition uint32 `json:"partition"`
	// Outcome is one of clean, torn_tail_truncated, data_loss, frozen.
	Outcome      string `json:"outcome"`
	Segments     int    `json:"segments"`
	Bytes        int64  `json:"bytes"`
	ScannedBytes int64  `json:"scanned_bytes"`
	// CleanStop says the active segment was not scanned: a clean stop's
	// marker vouched for its end (cleanstop.go).
	CleanStop     bool   `json:"clean_stop,omitempty"`
	FirstOffset   uint64 `json:"first_offset"`
	NextOffset    uint64 `json:"next_offset"`
	Records       uint64 `json:"records_scanned"`
	TornTailBytes int64  `json:"torn_tail_bytes"`
	LossBytes     int64  `json:"data_loss_bytes"`
	LossRecords   uint64 `json:"data_loss_records"`
	// KnownGaps counts offsets in gaps an earlier recovery or read found
	// and covered with skip frames (for sealed segments, once read).
	KnownGaps      uint64      `json:"known_gap_records"`
	Events         []LossEvent `json:"events"`
	Frozen         string      `json:"frozen,omitempty"`
	DurationMicros int64       `json:"duration_us"`
}

// Outcome names.
const (
	OutcomeClean     = "clean"
	OutcomeTornTail  = "torn_tail_truncated"
	OutcomeDataLoss  = "data_loss"
	OutcomeFrozen    = "frozen"
	ReportSchema     = "ironbus.recovery-report.v1"
	outcomeUnscanned = "unscanned"
)

func (r *LogReport) add(ev LossEvent) {
	r.Events = append(r.Events, ev)
	if ev.DataLoss {
		r.LossBytes += ev.Bytes
		r.LossRecords += ev.Records
	} else {
		r.TornTailBytes += ev.Bytes
	}
}

func (r *LogReport) finish(frozen error, started time.Time, now time.Time) {
	switch {
	case frozen != nil:
		r.Outcome = OutcomeFrozen
		r.Frozen = frozen.Error()
	case r.LossBytes > 0 || r.LossRecords > 0:
		r.Outcome = OutcomeDataLoss
	case r.TornTailBytes > 0:
		r.Outcome = OutcomeTornTail
	default:
		r.Outcome = OutcomeClean
	}
	if r.Events == nil {
		r.Events = []LossEvent{}
	}
	r.DurationMicros = now.Sub(started).Microseconds()
}

// HasDataLoss reports whether any event lost acknowledged data.
func (r *LogReport) HasDataLoss() bool { return r.LossBytes > 0 || r.LossRecords > 0 }

// RecoveryReport is the content of recovery-report.json: every log opened
// by this process, as recovery found it.
type RecoveryReport struct {
	Schema  string      `json:"schema"`
	Written time.Time   `json:"written"`
	Logs    []LogReport `json:"logs"`
}
