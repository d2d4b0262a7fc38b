package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
)

// Headers a dead letter carries beside the original record's own, so a
// reader of the queue sees where it came from and why, and a restart can
// find a move that already landed. Values are decimal text.
const (
	HeaderGroup     = "ironbus-dlq-group"
	HeaderStream    = "ironbus-dlq-stream"
	HeaderPartition = "ironbus-dlq-partition"
	HeaderOffset    = "ironbus-dlq-offset"
	HeaderAttempts  = "ironbus-dlq-attempts"
	HeaderReason    = "ironbus-dlq-reason"
	HeaderTimestamp = "ironbus-dlq-timestamp"
)

// LogDeadLetters is a dead-letter queue kept in a segment.Log: each dead
// letter is the original record (key, subject, headers, payload, codec as
// stored) with the dead-letter headers added.
type LogDeadLetters struct {
	log *segment.Log
}

var _ DeadLetters = (*LogDeadLetters)(nil)

// NewLogDeadLetters returns a dead-letter queue over log.
func NewLogDeadLetters(log *segment.Log) *LogDeadLetters { return &LogDeadLetters{log: log} }

// End implements DeadLetters: the committed end is at or below the offset
// any later append gets (offsets are never reused).
func (q *LogDeadLetters) End() uint64 { return q.log.Committed() }

// Append implements DeadLetters.
func (q *LogDeadLetters) Append(ctx context.Context, letter DeadLetter) error {
	body, err := EncodeDeadLetter(letter)
	if err != nil {
		return err
	}
	ticket, err := q.log.Append(ctx, body, record.Checksum(body))
	if err != nil {
		return fmt.Errorf("consumer: dead-letter append: %w", err)
	}
	if err := ticket.Wait(ctx); err != nil {
		return fmt.Errorf("consumer: dead-letter append: %w", err)
	}
	return nil
}

// Find implements DeadLetters by scanning the queue from from to its end.
// Only the tail written since a move's intent is scanned, so the cost is
// the handful of dead letters appended meanwhile.
func (q *LogDeadLetters) Find(from uint64, group string, partition uint32, source uint64) (bool, error) {
	reader := q.log.NewReader(max(from, q.log.FirstOffset()))
	defer reader.Close()
	for {
		entry, err := reader.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("consumer: dead-letter search: %w", err)
		}
		if entry.Gap != nil {
			continue
		}
		if letter, err := DecodeDeadLetter(entry.Body); err == nil &&
			letter.Group == group && letter.Partition == partition && letter.Offset == source {
			return true, nil
		}
	}
}

// EncodeDeadLetter builds the body stored in the queue. A source body
// that does not decode is kept whole as the payload.
func EncodeDeadLetter(letter DeadLetter) ([]byte, error) {
	body := record.Body{Payload: letter.Body}
	if view, err := record.Parse(letter.Body); err == nil {
		body = record.Body{Codec: view.Codec, Key: view.Key, Subject: view.Subject, Payload: view.Payload,
			RawLength: view.RawLength}
		for name, value := range view.Headers() {
			body.Headers = append(body.Headers, record.Header{Name: string(name), Value: value})
		}
	}
	body.Headers = append(body.Headers,
		record.Header{Name: HeaderGroup, Value: []byte(letter.Group)},
		record.Header{Name: HeaderStream, Value: []byte(letter.Stream)},
		record.Header{Name: HeaderPartition, Value: strconv.AppendUint(nil, uint64(letter.Partition), 10)},
		record.Header{Name: HeaderOffset, Value: strconv.AppendUint(nil, letter.Offset, 10)},
		record.Header{Name: HeaderAttempts, Value: strconv.AppendUint(nil, uint64(letter.Attempts), 10)},
		record.Header{Name: HeaderReason, Value: []byte(letter.Reason)},
		record.Header{Name: HeaderTimestamp, Value: strconv.AppendInt(nil, letter.Timestamp, 10)})
	encoded, err := record.AppendBody(nil, body)
	if err != nil {
		return nil, fmt.Errorf("consumer: dead letter for offset %d: %w", letter.Offset, err)
	}
	return encoded, nil
}

// DecodeDeadLetter reads the dead-letter headers of a queue record. Body
// is left nil: the record itself is the payload.
func DecodeDeadLetter(body []byte) (DeadLetter, error) {
	view, err := record.Parse(body)
	if err != nil {
		return DeadLetter{}, fmt.Errorf("%w: %w", ErrNotDeadLetter, err)
	}
	var letter DeadLetter
	seen := 0
	for name, value := range view.Headers() {
		var perr error
		switch string(name) {
		case HeaderGroup:
			letter.Group, seen = string(value), seen+1
		case HeaderStream:
			letter.Stream = string(value)
		case HeaderPartition:
			var p uint64
			p, perr = strconv.ParseUint(string(value), 10, 32)
			letter.Partition = uint32(p)
		case HeaderOffset:
			letter.Offset, perr = strconv.ParseUint(string(value), 10, 64)
			seen++
		case HeaderAttempts:
			var a uint64
			a, perr = strconv.ParseUint(string(value), 10, 32)
			letter.Attempts = uint32(a)
		case HeaderReason:
			letter.Reason = string(value)
		case HeaderTimestamp:
			letter.Timestamp, perr = strconv.ParseInt(string(value), 10, 64)
		}
		if perr != nil {
			return DeadLetter{}, fmt.Errorf("%w: header %s: %w", ErrNotDeadLetter, name, perr)
		}
	}
	if seen < 2 {
		return DeadLetter{}, fmt.Errorf("%w: no group or offset header", ErrNotDeadLetter)
	}
	return letter, nil
}
