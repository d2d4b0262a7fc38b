package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// Defaults for StreamOptions.
const (
	DefaultStreamRecords = 10_000
	DefaultStreamBytes   = 4 << 20
)

// StreamOptions shape a Stream.
type StreamOptions struct {
	// Partition is the partition to read, or AllPartitions for every
	// partition: batches then mix partitions, order holds per partition,
	// and the position is kept (and committed) per partition.
	Partition uint32
	// Filter, when set, is a subject pattern: only matching records are
	// delivered; the offsets skipped come as Gaps with Reason
	// GapFiltered, so the position advances past them.
	Filter string
	// MaxRecords and MaxBytes bound one batch (defaults
	// DefaultStreamRecords and DefaultStreamBytes; the broker caps
	// records at 10,000). MaxBytes counts stored frames; the first
	// record comes whatever its size.
	MaxRecords int
	MaxBytes   int
	// Wait is how long the broker may hold a request when the stream is
	// caught up (long poll); 0 answers at once with an empty batch.
	Wait time.Duration
	// CommitEvery commits the position this often from Next (0: only
	// when the caller calls Commit). A batch counts as processed once
	// Next is called again.
	CommitEvery time.Duration
}

// StreamBatch is one answer of a Stream. Its slices (Messages, Gaps,
// Positions) and the Key, Payload and header values of its Messages are
// the Stream's reused buffers: they are valid until the next call to
// Next, and must be copied to be kept.
type StreamBatch struct {
	Messages []Message
	Gaps     []Gap
	// Next is the position after this batch in the Stream's partition:
	// Commit(Next) marks every record of it (and before it) done. With
	// AllPartitions it is 0: Positions has one entry per partition.
	Next uint64
	// Positions is, for each partition this batch touched, the position
	// after it (sorted by partition); CommitPositions commits them all.
	Positions []PartitionOffset
	// Reason is why the broker ended the batch: "limit", "caught_up" or
	// "waited".
	Reason string
}

// PartitionOffset is an offset in one partition.
type PartitionOffset struct {
	Partition uint32
	Offset    uint64
}

// CorruptBatchError reports a record frame of a DeliverBatch that failed
// its checks (header or body CRC32C, length trailer, xxh3). Nothing of
// the batch from that frame on is handed over. errors.Is(err,
// ErrCorruptDelivery) holds.
type CorruptBatchError struct {
	Stream    string
	Partition uint32
	Offset    uint64 // the offset the frame should have carried
	Err       error
}

func (e *CorruptBatchError) Error() string {
	return fmt.Sprintf("ironbus client: corrupt delivery: %s/%d offset %d: %v", e.Stream, e.Partition, e.Offset, e.Err)
}

// Unwrap exposes ErrCorruptDelivery and the check that failed.
func (e *CorruptBatchError) Unwrap() []error { return []error{ErrCorruptDelivery, e.Err} }

// Stream reads a streaming group as fast as the broker can send it: each
// batch is a run of records as they are stored, sent without a lease, and
// every frame's checksums are verified here. The group's position is
// whatever was last committed; a new Stream (or connection) resumes from
// there, so processing is at-least-once. A Stream is not safe for
// concurrent use.
type Stream struct {
	client  *Client
	stream  string
	group   string
	options StreamOptions

	buffers    [2][]byte      // receive buffers, alternating so a batch outlives the next request's arrival
	spans      [2][]batchSpan // the runs of each buffer; reused like it
	gaps       [2][]Gap       // the gaps of each buffer's batch; reused like it
	subject    string         // the last message's subject: consecutive repeats share it
	turn       int            // the buffer of the latest request
	ahead      *call          // the request in flight, if any
	aheadID    uint32
	messages   []Message
	payloads   []byte            // decompressed payloads of the current batch; reused
	positions  map[uint32]uint64 // per partition: after the last batch Next returned
	committed  map[uint32]uint64 // per partition: the last position committed
	touched    []PartitionOffset // the current batch's Positions; reused
	lastCommit time.Time
}

// Stream opens a streaming consumer of group on stream (the group is
// created in streaming mode if it does not exist).
func (c *Client) Stream(stream, group string, opts StreamOptions) (*Stream, error) {
	if err := errors.Join(checkName("stream", stream), checkName("group", group), c.needGroups(),
		c.consumeScope(opts.Partition, opts.Filter)); err != nil {
		return nil, err
	}
	if opts.MaxRecords <= 0 {
		opts.MaxRecords = DefaultStreamRecords
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultStreamBytes
	}
	return &Stream{client: c, stream: stream, group: group, options: opts, lastCommit: time.Now(),
		positions: map[uint32]uint64{}, committed: map[uint32]uint64{}}, nil
}

// Next returns the next batch. It is empty (no Messages, no Gaps) when
// the stream is caught up and the wait elapsed. A corrupt frame fails
// the call with a *CorruptBatchError; a payload that cannot be
// decompressed (over Options.MaxDecompressedBytes, or garbage behind a
// valid CRC) with a *DecompressError naming its offset, which the caller
// may Commit past (Offset+1) to skip it. Compressed payloads come
// decompressed.
//
// Next reads one batch ahead: as soon as a batch has arrived it asks for
// the next one, so the broker sends while the caller decodes and
// processes. The batch read ahead when a Stream is dropped is lost to this
// connection (its read position is past it); the group's committed
// position is unaffected, and a new connection resumes from there.
func (s *Stream) Next(ctx context.Context) (StreamBatch, error) {
	if err := s.commitIfDue(ctx); err != nil {
		return StreamBatch{}, err
	}
	if s.ahead == nil {
		if err := s.request(); err != nil {
			return StreamBatch{}, err
		}
	}
	cl, id, turn := s.ahead, s.aheadID, s.turn
	if err := s.client.await(ctx, id, cl); err != nil {
		// The reader may still fill the call: leave it, and the buffer
		// it appends to, to the collector.
		s.ahead, s.buffers[turn], s.spans[turn], s.gaps[turn] = nil, nil, nil, nil
		return StreamBatch{}, err
	}
	s.ahead = nil
	defer putCall(cl)
	if cl.err != nil {
		return StreamBatch{}, cl.err
	}
	s.buffers[turn], s.spans[turn], s.gaps[turn] = cl.fetch.frames, cl.fetch.spans, cl.fetch.gaps
	if cl.fetch.reason == wire.EndLimit {
		// More is ready: have it sent while this batch is processed.
		if err := s.request(); err != nil {
			return StreamBatch{}, err
		}
	}
	return s.decode(&cl.fetch)
}

// request sends the Consume for the next batch into the buffer not
// holding the current one.
func (s *Stream) request() error {
	opts := FetchOptions{Partition: s.options.Partition, Type: GroupStreaming, MaxRecords: s.options.MaxRecords,
		MaxBytes: s.options.MaxBytes, Wait: s.options.Wait, Filter: s.options.Filter}
	cl := getCall()
	cl.fetch.stream, cl.fetch.raw, cl.fetch.decompressor = s.stream, true, s.client.decompressor
	s.turn ^= 1
	cl.fetch.frames, cl.fetch.spans, cl.fetch.gaps = s.buffers[s.turn][:0], s.spans[s.turn][:0], s.gaps[s.turn][:0]
	id, err := s.client.registerAhead(entry{kind: kindFetch, call: cl})
	if err != nil {
		putCall(cl)
		return err
	}
	s.client.enqueue(id, consumeMessage(s.stream, s.group, opts))
	s.ahead, s.aheadID = cl, id
	return nil
}

// decode verifies and decodes a raw answer into the Stream's messages.
// Records that came as Deliver (a broker without deliver_batch) were
// decoded by the reader already.
func (s *Stream) decode(f *fetchState) (StreamBatch, error) {
	f.decompress() // records that came as Deliver
	result := f.result()
	batch := StreamBatch{Gaps: result.Gaps, Reason: result.Reason}
	if len(f.rejected) > 0 {
		return StreamBatch{}, &DeliveryError{Rejected: f.rejected}
	}
	s.messages = append(s.messages[:0], result.Messages...)
	s.payloads = s.payloads[:0]
	s.touched = s.touched[:0]
	for _, span := range f.spans {
		run := wire.DeliverBatch{Partition: span.partition, First: span.first, Next: span.next,
			Count: uint32(span.count), Frames: f.frames[span.start:span.end]}
		if err := walkRecords(run, s.appendRecord(span.partition)); err != nil {
			var corrupt *CorruptBatchError
			if errors.As(err, &corrupt) {
				corrupt.Stream = s.stream
			}
			return StreamBatch{}, err
		}
		s.advance(span.partition, span.next)
	}
	for _, m := range s.messages {
		s.advance(m.Partition, m.Offset+1)
	}
	for _, gap := range batch.Gaps {
		s.advance(gap.Partition, gap.To)
	}
	slices.SortFunc(s.touched, func(a, b PartitionOffset) int { return cmp.Compare(a.Partition, b.Partition) })
	batch.Positions = s.touched
	if s.options.Partition != AllPartitions {
		batch.Next = s.positions[s.options.Partition]
	}
	batch.Messages = s.messages
	return batch, nil
}

// advance moves a partition's position to at least next, and notes the
// partition among those the current batch touched.
func (s *Stream) advance(partition uint32, next uint64) {
	position := max(s.positions[partition], next)
	s.positions[partition] = position
	for i := range s.touched {
		if s.touched[i].Partition == partition {
			s.touched[i].Offset = position
			return
		}
	}
	s.touched = append(s.touched, PartitionOffset{Partition: partition, Offset: position})
}

// appendRecord returns the walk callback that decodes one verified record
// frame into a Message aliasing it.
func (s *Stream) appendRecord(partition uint32) func(record.FrameHeader, []byte, error) error {
	return func(h record.FrameHeader, frame []byte, corrupt error) error {
		if corrupt != nil {
			return corrupt // never a message; the caller sees which offset
		}
		view, err := record.Parse(frame[record.FrameHeaderSize : record.FrameHeaderSize+int(h.BodyLength)])
		switch {
		case errors.Is(err, record.ErrTooNew):
			return fmt.Errorf("%w: %s/%d offset %d: %w", ErrUnsupportedRecord, s.stream, partition, h.Offset, err)
		case err != nil:
			return &CorruptBatchError{Stream: s.stream, Partition: partition, Offset: h.Offset, Err: err}
		}
		m := Message{Stream: s.stream, Partition: partition, Offset: h.Offset, Attempt: 1,
			Timestamp: time.Unix(0, h.Timestamp), Key: view.Key, Payload: view.Payload, Codec: view.Codec, Tombstone: view.Tombstone}
		if view.Codec != record.CodecNone {
			if m.Payload, err = s.decompress(view, partition, h.Offset); err != nil {
				return err
			}
		}
		if len(view.Subject) > 0 {
			if string(view.Subject) != s.subject {
				s.subject = string(view.Subject)
			}
			m.Subject = s.subject
		}
		if len(view.HeaderBytes) > 0 { // the iterator costs an allocation
			for name, value := range view.Headers() {
				m.Headers = append(m.Headers, Header{Name: string(name), Value: value})
			}
		}
		s.messages = append(s.messages, m)
		return nil
	}
}

// decompress restores a verified record's payload into the Stream's
// payload buffer, which lives until the next call to Next like the
// receive buffer the other fields alias. When the buffer has to grow,
// earlier payloads of the batch keep the old array, so they stay valid.
func (s *Stream) decompress(view record.View, partition uint32, offset uint64) ([]byte, error) {
	start := len(s.payloads)
	out, err := decompressPayload(s.client.decompressor, s.payloads, view, s.stream, partition, offset)
	if err != nil {
		return nil, err
	}
	s.payloads = out
	return out[start:len(out):len(out)], nil
}

// All iterates over batches until ctx ends or a call fails (the error is
// the last thing yielded).
func (s *Stream) All(ctx context.Context) iter.Seq2[StreamBatch, error] {
	return func(yield func(StreamBatch, error) bool) {
		for {
			batch, err := s.Next(ctx)
			if !yield(batch, err) || err != nil {
				return
			}
		}
	}
}

// Position is the offset after the last batch Next returned, in the
// Stream's partition (with AllPartitions, use Positions).
func (s *Stream) Position() uint64 { return s.positions[s.options.Partition] }

// Positions is, for every partition read so far, the offset after the
// last batch Next returned; sorted by partition.
func (s *Stream) Positions() []PartitionOffset {
	out := make([]PartitionOffset, 0, len(s.positions))
	for partition, offset := range s.positions {
		out = append(out, PartitionOffset{Partition: partition, Offset: offset})
	}
	slices.SortFunc(out, func(a, b PartitionOffset) int { return cmp.Compare(a.Partition, b.Partition) })
	return out
}

// Commit stores offset as the group's position in the Stream's
// partition: every offset below it is done. Commit(batch.Next) settles a
// batch and everything before it. A Stream of AllPartitions commits with
// CommitPositions or CommitPartition.
func (s *Stream) Commit(ctx context.Context, offset uint64) error {
	if s.options.Partition == AllPartitions {
		return fmt.Errorf("%w: a Stream of every partition commits with CommitPositions or CommitPartition", ErrInvalidArgument)
	}
	return s.CommitPartition(ctx, s.options.Partition, offset)
}

// CommitPartition stores offset as the group's position in one
// partition.
func (s *Stream) CommitPartition(ctx context.Context, partition uint32, offset uint64) error {
	status, err := s.client.Commit(ctx, s.stream, s.group, partition, offset)
	if err != nil {
		return err
	}
	if status != AckOK {
		return fmt.Errorf("%w: commit of %s/%d at %d: status %v", ErrInvalidArgument, s.stream, partition, offset, status)
	}
	s.committed[partition] = max(s.committed[partition], offset)
	s.lastCommit = time.Now()
	return nil
}

// CommitPositions commits the position of every partition that moved
// since its last commit: everything Next returned so far is done. It is
// the one call that settles a Stream, of one partition or of all.
func (s *Stream) CommitPositions(ctx context.Context) error {
	for _, p := range s.Positions() {
		if committed, ok := s.committed[p.Partition]; ok && p.Offset <= committed {
			continue
		}
		if err := s.CommitPartition(ctx, p.Partition, p.Offset); err != nil {
			return err
		}
	}
	s.lastCommit = time.Now()
	return nil
}

// commitIfDue commits the positions of the batches returned so far when
// CommitEvery has passed since the last commit.
func (s *Stream) commitIfDue(ctx context.Context) error {
	if s.options.CommitEvery <= 0 || time.Since(s.lastCommit) < s.options.CommitEvery {
		return nil
	}
	return s.CommitPositions(ctx)
}

// walkRecords verifies every record frame of a DeliverBatch (header
// CRC32C, length trailer, body CRC32C and xxh3) and calls fn with each,
// stepping over the other frames a run may hold (the commit frames that
// closed producer batches) by the length in their prefix. A frame whose
// header holds but whose body fails goes to fn with a nil frame and its
// *CorruptBatchError, so fn decides whether the rest of the batch is worth
// having. Offsets must run from First without a hole and the count must
// match: anything else is corruption of the batch, and ends it.
func walkRecords(b wire.DeliverBatch, fn func(record.FrameHeader, []byte, error) error) error {
	want := b.First
	corrupt := func(err error) error {
		return &CorruptBatchError{Partition: b.Partition, Offset: want, Err: err}
	}
	for frames := b.Frames; len(frames) > 0; {
		if !record.IsFrame(frames) {
			length, err := record.OtherFrameLength(frames)
			if err != nil {
				return corrupt(err)
			}
			frames = frames[length:]
			continue
		}
		h, err := record.ParseFrameHeader(frames, record.AbsoluteMaxBody)
		if err != nil {
			return corrupt(err) // the frame boundaries are lost with it
		}
		if h.Offset != want || want >= b.Next || len(frames) < int(h.FrameLength) {
			return corrupt(fmt.Errorf("%w: record offset %d (%d bytes) in a batch of [%d, %d) with %d bytes left",
				record.ErrCorrupt, h.Offset, h.FrameLength, b.First, b.Next, len(frames)))
		}
		frame := frames[:h.FrameLength]
		if _, err := record.VerifyFrame(frame, h); err != nil {
			frame, err = nil, corrupt(err)
			if err := fn(h, nil, err); err != nil {
				return err
			}
		} else if err := fn(h, frame, nil); err != nil {
			return err
		}
		frames = frames[h.FrameLength:]
		want++
	}
	if got := want - b.First; got != uint64(b.Count) {
		return corrupt(fmt.Errorf("%w: batch says %d records, holds %d", record.ErrCorrupt, b.Count, got))
	}
	return nil
}
