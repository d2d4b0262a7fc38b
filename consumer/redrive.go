package consumer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
)

// Redrive republishes a dead-letter queue's records to the stream they
// came from, idempotently. The queue keeps a "redriven up to" mark in a
// checkpoint of its own log; a redrive starts from the mark, so running
// it twice republishes each dead letter once.
//
// A round is crash-safe in three durable steps:
//
//  1. the intent: the mark, the end of the round in the queue, and the
//     committed end of every target partition the round writes to;
//  2. the republished records, appended and waited durable;
//  3. the mark moved to the end of the round, the intent cleared.
//
// A crash after 1 leaves the intent; the next redrive finishes that round
// first, scanning each target partition from the end recorded in the
// intent for the ironbus-redriven-from header, and appends only what did
// not land. Only this queue writes that header to its stream, and only
// after its intent, so the scan sees exactly the round's own records.

// HeaderRedrivenFrom is the header a redriven record carries: the offset
// of the dead letter it came from in the queue, decimal text.
const HeaderRedrivenFrom = "ironbus-redriven-from"

// redriveCheckpoint names the mark's checkpoint on the queue's log. Group
// checkpoints start with "group-", so the two never collide.
const redriveCheckpoint = "redrive"

// redriveRound bounds the dead letters of one round, so a long queue is
// never held in memory at once.
const redriveRound = 1024

const redriveStateV1 = 1

// RedriveTarget returns the log of the source stream's partition a dead
// letter goes back to.
type RedriveTarget func(partition uint32) (*segment.Log, error)

// RedriveResult is what a redrive did.
type RedriveResult struct {
	Republished uint64 // records appended to the stream by this call
	Skipped     uint64 // found already republished (an interrupted run), or not dead letters
	Mark        uint64 // every dead letter below it is redriven
}

// redriveState is the decoded mark checkpoint.
type redriveState struct {
	Mark   uint64
	Intent *redriveIntent
}

type redriveIntent struct {
	To      uint64            // the round covers queue offsets [Mark, To)
	Targets map[uint32]uint64 // partition -> its committed end before the round
}

// RedriveMark returns the queue's mark: every dead letter below it has
// been redriven (0 when none ever was).
func RedriveMark(queue *segment.Log) (uint64, error) {
	st, err := loadRedrive(queue)
	return st.Mark, err
}

// Redrive republishes up to maxLetters dead letters of queue (0 = all)
// through target, oldest first, starting at the queue's mark.
func Redrive(ctx context.Context, queue *segment.Log, target RedriveTarget, maxLetters int) (RedriveResult, error) {
	st, err := loadRedrive(queue)
	if err != nil {
		return RedriveResult{}, err
	}
	var result RedriveResult
	if st.Intent != nil {
		if err := finishRound(ctx, queue, target, st, &result); err != nil {
			return result, err
		}
		st = redriveState{Mark: st.Intent.To}
	}
	for maxLetters == 0 || result.Republished+result.Skipped < uint64(maxLetters) {
		limit := redriveRound
		if maxLetters > 0 {
			limit = min(limit, maxLetters-int(result.Republished+result.Skipped))
		}
		letters, to, err := readRedrive(queue, st.Mark, queue.Committed(), limit)
		if err != nil {
			return result, err
		}
		if to == st.Mark {
			break
		}
		intent := &redriveIntent{To: to, Targets: map[uint32]uint64{}}
		for _, letter := range letters {
			if _, ok := intent.Targets[letter.partition]; !ok && letter.body != nil {
				l, err := target(letter.partition)
				if err != nil {
					return result, fmt.Errorf("consumer: redrive: %w", err)
				}
				intent.Targets[letter.partition] = l.Committed()
			}
		}
		st.Intent = intent
		if err := saveRedrive(queue, st); err != nil {
			return result, err
		}
		if err := republish(ctx, target, letters, nil, &result); err != nil {
			return result, err
		}
		st = redriveState{Mark: to}
		if err := saveRedrive(queue, st); err != nil {
			return result, err
		}
	}
	result.Mark = st.Mark
	return result, nil
}

// finishRound completes a round a crash interrupted: what already landed
// in the target partitions is skipped, the rest appended, then the mark
// moves.
func finishRound(ctx context.Context, queue *segment.Log, target RedriveTarget, st redriveState, result *RedriveResult) error {
	letters, _, err := readRedrive(queue, st.Mark, st.Intent.To, 0)
	if err != nil {
		return err
	}
	landed := map[uint64]bool{}
	for partition, end := range st.Intent.Targets {
		l, err := target(partition)
		if err != nil {
			return fmt.Errorf("consumer: redrive: %w", err)
		}
		if err := scanRedriven(l, end, landed); err != nil {
			return err
		}
	}
	if err := republish(ctx, target, letters, landed, result); err != nil {
		return err
	}
	return saveRedrive(queue, redriveState{Mark: st.Intent.To})
}

// redriveLetter is one queue record of a round: the record to republish,
// or nil for a queue record that is not a dead letter.
type redriveLetter struct {
	offset    uint64
	partition uint32
	body      []byte
}

// readRedrive reads the queue from from up to to, at most limit records
// (0 = no limit), and returns them with the offset after the last one.
func readRedrive(queue *segment.Log, from, to uint64, limit int) ([]redriveLetter, uint64, error) {
	reader := queue.NewReader(max(from, queue.FirstOffset()))
	defer reader.Close()
	var letters []redriveLetter
	next := from
	for next < to && (limit == 0 || len(letters) < limit) {
		entry, err := reader.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, next, fmt.Errorf("consumer: redrive: reading the queue: %w", err)
		}
		if entry.Gap != nil {
			next = min(entry.Gap.To, to)
			continue
		}
		if entry.Offset >= to {
			break
		}
		next = entry.Offset + 1
		letter := redriveLetter{offset: entry.Offset}
		if dead, err := DecodeDeadLetter(entry.Body); err == nil {
			letter.partition = dead.Partition
			if letter.body, err = redrivenBody(entry.Body, entry.Offset); err != nil {
				letter.body = nil
			}
		}
		letters = append(letters, letter)
	}
	return letters, next, nil
}

// redrivenBody rebuilds the original record from a dead letter: its own
// key, subject, headers and payload, without the dead-letter headers (or
// an earlier redrive's mark), plus the mark of this redrive.
func redrivenBody(stored []byte, offset uint64) ([]byte, error) {
	view, err := record.Parse(stored)
	if err != nil {
		return nil, err
	}
	body := record.Body{Codec: view.Codec, Key: view.Key, Subject: view.Subject, Payload: view.Payload, RawLength: view.RawLength}
	for name, value := range view.Headers() {
		if strings.HasPrefix(string(name), "ironbus-dlq-") || string(name) == HeaderRedrivenFrom {
			continue
		}
		body.Headers = append(body.Headers, record.Header{Name: string(name), Value: value})
	}
	body.Headers = append(body.Headers, record.Header{Name: HeaderRedrivenFrom, Value: strconv.AppendUint(nil, offset, 10)})
	return record.AppendBody(nil, body)
}

// republish appends every letter not in landed and waits until all are
// durable.
func republish(ctx context.Context, target RedriveTarget, letters []redriveLetter, landed map[uint64]bool, result *RedriveResult) error {
	var tickets []segment.Ticket
	for _, letter := range letters {
		if letter.body == nil || landed[letter.offset] {
			result.Skipped++
			continue
		}
		l, err := target(letter.partition)
		if err != nil {
			return fmt.Errorf("consumer: redrive: %w", err)
		}
		ticket, err := l.Append(ctx, letter.body, record.Checksum(letter.body))
		if err != nil {
			return fmt.Errorf("consumer: redrive: append: %w", err)
		}
		tickets = append(tickets, ticket)
		result.Republished++
	}
	for _, ticket := range tickets {
		if err := ticket.Wait(ctx); err != nil {
			return fmt.Errorf("consumer: redrive: append: %w", err)
		}
	}
	return nil
}

// scanRedriven notes in landed the queue offset of every redriven record
// the log holds from from to its end.
func scanRedriven(l *segment.Log, from uint64, landed map[uint64]bool) error {
	reader := l.NewReader(max(from, l.FirstOffset()))
	defer reader.Close()
	for {
		entry, err := reader.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("consumer: redrive: scanning the stream: %w", err)
		}
		if entry.Gap != nil {
			continue
		}
		view, err := record.Parse(entry.Body)
		if err != nil {
			continue
		}
		for name, value := range view.Headers() {
			if string(name) != HeaderRedrivenFrom {
				continue
			}
			if offset, err := strconv.ParseUint(string(value), 10, 64); err == nil {
				landed[offset] = true
			}
		}
	}
}

func loadRedrive(queue *segment.Log) (redriveState, error) {
	data, err := queue.ReadCheckpoint(redriveCheckpoint)
	if errors.Is(err, segment.ErrNotFound) {
		return redriveState{}, nil
	}
	if err != nil {
		return redriveState{}, fmt.Errorf("consumer: redrive mark: %w", err)
	}
	return decodeRedrive(data)
}

func saveRedrive(queue *segment.Log, st redriveState) error {
	if err := queue.WriteCheckpoint(redriveCheckpoint, encodeRedrive(st)); err != nil {
		return fmt.Errorf("consumer: redrive mark: %w", err)
	}
	return nil
}

// encodeRedrive: version, mark, then an intent flag and, with an intent,
// its end and its target partitions with their ends.
func encodeRedrive(st redriveState) []byte {
	data := []byte{redriveStateV1}
	data = binary.LittleEndian.AppendUint64(data, st.Mark)
	if st.Intent == nil {
		return append(data, 0)
	}
	data = append(data, 1)
	data = binary.LittleEndian.AppendUint64(data, st.Intent.To)
	data = binary.LittleEndian.AppendUint32(data, uint32(len(st.Intent.Targets)))
	for partition, end := range st.Intent.Targets {
		data = binary.LittleEndian.AppendUint32(data, partition)
		data = binary.LittleEndian.AppendUint64(data, end)
	}
	return data
}

func decodeRedrive(data []byte) (redriveState, error) {
	corrupt := func(what string) (redriveState, error) {
		return redriveState{}, fmt.Errorf("%w: redrive mark: %s", ErrCorruptCheckpoint, what)
	}
	if len(data) < 10 {
		return corrupt("truncated")
	}
	if data[0] != redriveStateV1 {
		return corrupt(fmt.Sprintf("version %d", data[0]))
	}
	st := redriveState{Mark: binary.LittleEndian.Uint64(data[1:9])}
	switch {
	case data[9] == 0 && len(data) == 10:
		return st, nil
	case data[9] != 1 || len(data) < 22:
		return corrupt("bad intent")
	}
	intent := &redriveIntent{To: binary.LittleEndian.Uint64(data[10:18]), Targets: map[uint32]uint64{}}
	count, rest := binary.LittleEndian.Uint32(data[18:22]), data[22:]
	if uint64(len(rest)) != uint64(count)*12 {
		return corrupt(fmt.Sprintf("%d targets in %d bytes", count, len(rest)))
	}
	for ; len(rest) > 0; rest = rest[12:] {
		partition := binary.LittleEndian.Uint32(rest)
		if _, twice := intent.Targets[partition]; twice {
			// The encoder writes each partition once: a second entry is
			// damage, and silently keeping one of the two would scan the
			// wrong tail after a crash.
			return corrupt(fmt.Sprintf("partition %d listed twice", partition))
		}
		intent.Targets[partition] = binary.LittleEndian.Uint64(rest[4:])
	}
	st.Intent = intent
	return st, nil
}
