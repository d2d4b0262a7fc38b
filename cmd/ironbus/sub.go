package main

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/subject"
	"github.com/ironbus/ironbus/wire"
)

type subOptions struct {
	addr      string
	stream    string
	subject   string // a subject pattern: the filter, and without --stream the streams it spans
	partition int64  // -1: every partition
	spanning  bool   // --subject without --stream
	group     string
	max       int
	ack       bool
	nack      bool
	term      bool
	nackDelay time.Duration
	wait      time.Duration
	// reconnectWait bounds how long sub tries to reconnect after the
	// connection to the broker is lost (0: it gives up at once).
	reconnectWait time.Duration
	keyShared     bool
	broadcast     bool
	streaming     bool
	from          string
	fromTime      string
}

func newSubCmd(opts *globalOptions) *cobra.Command {
	sub := &subOptions{}
	cmd := &cobra.Command{
		Use:     "sub --group G [--stream NAME | --subject PATTERN] [--partition P] [--max N] [--ack|--nack|--term] [--key-shared|--broadcast|--streaming] [--from POS]",
		Short:   "Consume records as a member of a group",
		Long:    subLong,
		Example: subExamples,
		Args:    cobra.NoArgs,
	}
	flags := cmd.Flags()
	addAddrFlag(cmd, &sub.addr)
	flags.StringVar(&sub.stream, "stream", segment.DefaultStream, "stream to consume")
	flags.StringVar(&sub.subject, "subject", "", "subject pattern to filter by; without --stream, every stream bound to a matching subject")
	flags.Int64Var(&sub.partition, "partition", -1, "partition to read (default: every partition)")
	flags.StringVar(&sub.group, "group", "", "work group to consume as (required)")
	flags.IntVar(&sub.max, "max", 10, "stop after this many records (0 = no limit)")
	flags.BoolVar(&sub.ack, "ack", false, "acknowledge each record after printing it")
	flags.BoolVar(&sub.nack, "nack", false, "return each record for redelivery after printing it")
	flags.BoolVar(&sub.term, "term", false, "settle each record without redelivery or the dead-letter queue")
	flags.DurationVar(&sub.nackDelay, "nack-delay", 0, "with --nack: redeliver after this long instead of the group's backoff")
	flags.BoolVar(&sub.keyShared, "key-shared", false, "create or join a key-shared group")
	flags.BoolVar(&sub.broadcast, "broadcast", false, "create or join a broadcast group (one reader, cumulative ack)")
	flags.BoolVar(&sub.streaming, "streaming", false, "create or join a streaming group (own position, --ack commits it)")
	flags.StringVar(&sub.from, "from", "", "where a new group starts: an offset, earliest (default) or latest")
	flags.StringVar(&sub.fromTime, "from-time", "", "where a new group starts: the first record stored at or after this RFC 3339 time")
	flags.DurationVar(&sub.wait, "wait", 5*time.Second, "stop when nothing new arrives for this long")
	flags.DurationVar(&sub.reconnectWait, "reconnect-wait", 10*time.Second,
		"when the connection to the broker is lost, keep reconnecting this long before exiting with code 5 (0: exit at once)")
	flags.BoolVar(&opts.json, "json", false, "print NDJSON: one object per record (schema "+deliverySchema+") or gap ("+gapSchema+")")
	cmd.RunE = classified(func() error {
		sub.spanning = sub.subject != "" && !cmd.Flags().Changed("stream")
		return runSub(cmd.Context(), opts, sub)
	})
	return cmd
}

func runSub(ctx context.Context, opts *globalOptions, sub *subOptions) error {
	groupOptions, err := sub.check()
	if err != nil {
		return err
	}
	c, err := dialBroker(ctx, opts, sub.addr, 1)
	if err != nil {
		return err
	}
	printed := 0
	for {
		err := sub.consume(ctx, opts, c, groupOptions, &printed)
		_ = c.Close()
		if err == nil || !connectionLost(err) {
			return err
		}
		// The group's place is the broker's (cursor, leases), so a new
		// connection carries on where this one stopped; records printed
		// and not yet settled come again (at-least-once).
		if c, err = redial(ctx, opts, sub.addr, sub.reconnectWait, err); err != nil {
			return err
		}
	}
}

// consume reads on one connection until --max records are printed,
// --wait passes with nothing new, or an error ends it. printed counts
// across connections.
func (sub *subOptions) consume(ctx context.Context, opts *globalOptions, c *client.Client, groupOptions client.GroupOptions, printed *int) error {
	streams := []string{sub.stream}
	if sub.spanning {
		var err error
		if streams, err = spannedStreams(ctx, c, sub.subject); err != nil {
			return err
		}
	}
	for _, stream := range streams {
		if _, err := c.OpenGroup(ctx, stream, sub.group, groupOptions); err != nil {
			return brokerError(err, stream)
		}
	}
	fetch := client.FetchOptions{Type: groupOptions.Type, Partition: groupOptions.Partition, Filter: groupOptions.Filter,
		Wait: sub.wait / time.Duration(len(streams))}
	idleSince := time.Now()
	for sub.max == 0 || *printed < sub.max {
		round := time.Now()
		progressed := false
		for _, stream := range streams {
			n, moved, err := sub.fetchOnce(ctx, opts, c, stream, fetch, *printed)
			if err != nil {
				return err
			}
			*printed += n
			progressed = progressed || moved
			if sub.max > 0 && *printed >= sub.max {
				return nil
			}
		}
		switch {
		case progressed:
			idleSince = time.Now()
		case time.Since(idleSince) >= sub.wait:
			return nil // --wait passed with nothing new
		case time.Since(round) < emptyRoundPause:
			// A broker that does not park fetches (or caps them short)
			// is asked again at a walking pace, not in a busy loop.
			time.Sleep(min(emptyRoundPause, sub.wait-time.Since(idleSince)))
		}
		// An empty answer before --wait passed (a broker draining its
		// long polls as it stops) is not the end: the next fetch finds
		// out whether the connection still stands.
	}
	return nil
}

// emptyRoundPause is the least time between two empty rounds of fetches.
const emptyRoundPause = 50 * time.Millisecond

// fetchOnce fetches, prints and settles one batch of a stream; moved
// says whether anything (a record or a gap) came.
func (sub *subOptions) fetchOnce(ctx context.Context, opts *globalOptions, c *client.Client, stream string, fetch client.FetchOptions, printed int) (int, bool, error) {
	fetch.MaxRecords = 100
	if sub.max > 0 {
		fetch.MaxRecords = min(fetch.MaxRecords, sub.max-printed)
	}
	result, err := c.Fetch(ctx, stream, sub.group, fetch)
	if err != nil {
		return 0, false, brokerError(err, stream)
	}
	for _, gap := range result.Gaps {
		if opts.json {
			_ = writeJSON(opts.stdout, newGapOutput(gap.From, gap.To, gap.Reason).in(stream, gap.Partition))
			continue
		}
		fmt.Fprintf(opts.stdout, "%sgap %d..%d (%s)\n", sub.where(stream, gap.Partition), gap.From, gap.To-1, gap.Reason)
	}
	for _, message := range result.Messages {
		if opts.json {
			_ = writeJSON(opts.stdout, messageOutput(message))
			continue
		}
		fmt.Fprintln(opts.stdout, sub.where(stream, message.Partition)+messageLine(message))
	}
	if len(result.Messages) > 0 {
		if err := sub.settle(ctx, c, stream, result.Messages); err != nil {
			return 0, false, err
		}
	}
	return len(result.Messages), len(result.Messages) > 0 || len(result.Gaps) > 0, nil
}

// where prefixes a text line with its stream when sub spans several, and
// its partition when it is not 0, so a one-partition stream prints as
// it always did.
func (sub *subOptions) where(stream string, partition uint32) string {
	var prefix string
	if sub.spanning {
		prefix = "stream=" + stream + " "
	}
	if partition != 0 {
		prefix += fmt.Sprintf("partition=%d ", partition)
	}
	return prefix
}

func messageLine(m client.Message) string {
	var line strings.Builder
	fmt.Fprintf(&line, "#%d key=%s", m.Offset, humanField(m.Key))
	writeHumanHeaders(&line, messageHeaders(m.Headers))
	if m.Codec != client.CodecNone {
		fmt.Fprintf(&line, " codec=%s", m.Codec)
	}
	fmt.Fprintf(&line, " payload=%s", humanPayload(m.Payload))
	if m.Redelivered {
		fmt.Fprintf(&line, " (attempt %d)", m.Attempt)
	}
	return line.String()
}

// messageHeaders walks a delivered record's headers in order.
func messageHeaders(headers []client.Header) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		for _, h := range headers {
			if !yield([]byte(h.Name), h.Value) {
				return
			}
		}
	}
}

// check validates the flags and turns them into the group's options.
func (sub *subOptions) check() (client.GroupOptions, error) {
	var group client.GroupOptions
	settles, types := 0, 0
	for _, set := range []bool{sub.ack, sub.nack, sub.term} {
		if set {
			settles++
		}
	}
	for _, kind := range []struct {
		set  bool
		kind client.GroupType
	}{{sub.keyShared, client.GroupKeyShared}, {sub.broadcast, client.GroupBroadcast}, {sub.streaming, client.GroupStreaming}} {
		if kind.set {
			types++
			group.Type = kind.kind
		}
	}
	switch {
	case sub.group == "":
		return group, exitErrorf(exitUsage, "--group is required: members of one group share its records")
	case settles > 1:
		return group, exitErrorf(exitUsage, "--ack, --nack and --term exclude each other")
	case types > 1:
		return group, exitErrorf(exitUsage, "--key-shared, --broadcast and --streaming exclude each other: a group has one type")
	case sub.nackDelay != 0 && !sub.nack:
		return group, exitErrorf(exitUsage, "--nack-delay needs --nack")
	case sub.nackDelay < 0:
		return group, exitErrorf(exitUsage, "--nack-delay must be positive")
	case (sub.nack || sub.term) && (sub.broadcast || sub.streaming):
		return group, exitErrorf(exitUsage, "--nack and --term need leases: use them with work or --key-shared groups")
	case sub.wait < 0:
		return group, exitErrorf(exitUsage, "--wait must be 0 (do not wait) or more")
	case sub.reconnectWait < 0:
		return group, exitErrorf(exitUsage, "--reconnect-wait must be 0 (do not reconnect) or more")
	case sub.max < 0:
		return group, exitErrorf(exitUsage, "--max must be 0 (no limit) or more")
	case sub.partition < -1 || sub.partition >= wire.MaxPartitions:
		return group, exitErrorf(exitUsage, "--partition %d: want 0 to %d", sub.partition, wire.MaxPartitions-1)
	}
	if sub.subject != "" {
		if err := subject.ValidatePattern([]byte(sub.subject)); err != nil {
			return group, exitErrorf(exitUsage, "--subject %q: %v (dot-separated tokens; * matches one, > the rest)", sub.subject, err)
		}
	}
	group.Partition, group.Filter = client.AllPartitions, sub.subject
	if sub.partition >= 0 {
		group.Partition = uint32(sub.partition)
	}
	start, err := parseStart(sub.from, sub.fromTime)
	group.Start = start
	return group, err
}

// parseStart reads --from and --from-time.
func parseStart(from, fromTime string) (client.StartPosition, error) {
	switch {
	case from != "" && fromTime != "":
		return client.StartPosition{}, exitErrorf(exitUsage, "--from and --from-time exclude each other")
	case fromTime != "":
		at, err := time.Parse(time.RFC3339Nano, fromTime)
		if err != nil {
			return client.StartPosition{}, exitErrorf(exitUsage, "--from-time %q: want an RFC 3339 time such as 2026-11-29T08:00:00Z", fromTime)
		}
		return client.StartPosition{Kind: client.StartTime, Time: at}, nil
	case from == "" || from == "earliest":
		return client.StartPosition{Kind: client.StartEarliest}, nil
	case from == "latest":
		return client.StartPosition{Kind: client.StartLatest}, nil
	}
	offset, err := strconv.ParseUint(from, 10, 64)
	if err != nil {
		return client.StartPosition{}, exitErrorf(exitUsage, "--from %q: want an offset, earliest or latest", from)
	}
	return client.StartPosition{Kind: client.StartOffset, Offset: offset}, nil
}

// settle acks, nacks or terms what was printed, as asked; for broadcast
// and streaming groups --ack moves the group's position past it, in each
// partition the messages came from.
func (sub *subOptions) settle(ctx context.Context, c *client.Client, stream string, messages []client.Message) error {
	var err error
	switch {
	case sub.ack && (sub.broadcast || sub.streaming):
		for partition, last := range lastOffsets(messages) {
			if sub.broadcast {
				_, err = c.CumulativeAck(ctx, stream, sub.group, partition, last+1)
			} else {
				_, err = c.Commit(ctx, stream, sub.group, partition, last+1)
			}
			if err != nil {
				break
			}
		}
	case sub.ack:
		_, err = c.Ack(ctx, stream, sub.group, messages...)
	case sub.nack:
		delay := sub.nackDelay
		if delay == 0 {
			delay = -1 // the group's backoff
		}
		_, err = c.Nack(ctx, stream, sub.group, delay, messages...)
	case sub.term:
		_, err = c.Term(ctx, stream, sub.group, messages...)
	}
	if err != nil {
		return brokerError(err, stream)
	}
	return nil
}

// lastOffsets is the highest offset of each partition among messages.
func lastOffsets(messages []client.Message) map[uint32]uint64 {
	last := map[uint32]uint64{}
	for _, m := range messages {
		last[m.Partition] = max(last[m.Partition], m.Offset)
	}
	return last
}

// deliverySchema names one record line of sub --json: a delivery, not a
// stored record, so it carries the attempt and redelivery of this group.
const deliverySchema = "ironbus.cli.delivery.v1"

// subMessage is one record in sub's NDJSON output.
type subMessage struct {
	Schema          string         `json:"schema"`
	Stream          string         `json:"stream"`
	Partition       uint32         `json:"partition"`
	Offset          uint64         `json:"offset"`
	Timestamp       string         `json:"timestamp"`
	Attempt         uint32         `json:"attempt"`
	Redelivered     bool           `json:"redelivered"`
	Key             string         `json:"key"`
	KeyEncoding     string         `json:"key_encoding"`
	Subject         string         `json:"subject"`
	Headers         []headerOutput `json:"headers"` // in record order; names may repeat
	Payload         string         `json:"payload"`
	PayloadEncoding string         `json:"payload_encoding"`
	Codec           string         `json:"codec"` // how it was stored; Payload is decompressed
}

func messageOutput(m client.Message) subMessage {
	key, keyEncoding := encodeBytes(m.Key)
	payload, payloadEncoding := encodeBytes(m.Payload)
	headers := make([]headerOutput, 0, len(m.Headers))
	for _, h := range m.Headers {
		header := headerOutput{Name: h.Name}
		header.Value, header.ValueEncoding = encodeBytes(h.Value)
		headers = append(headers, header)
	}
	return subMessage{Headers: headers, Schema: deliverySchema, Stream: m.Stream, Offset: m.Offset, Partition: m.Partition, Timestamp: m.Timestamp.UTC().Format(time.RFC3339Nano),
		Attempt: m.Attempt, Redelivered: m.Redelivered, Key: key, KeyEncoding: keyEncoding, Subject: m.Subject,
		Payload: payload, PayloadEncoding: payloadEncoding, Codec: m.Codec.String()}
}

// The help text lives in constants so the constructor stays a screen long.
const (
	subLong = `Consume records from a stream as a member of a group.

A group's type is fixed when it is created (by its first consumer):
  work (default)  members share its records; each is leased to one member
  --key-shared    like work, but each key belongs to one member at a time
                  and its records come one at a time, in order
  --broadcast     one reader at a time, no leases; --ack moves the group's
                  cursor past what was printed (a cumulative ack)
  --streaming     no leases; the reader keeps its own position and --ack
                  commits it
Consuming an existing group as another type is an error naming both.

sub keeps fetching until it has printed --max records (0 = no limit) or
--wait passes with nothing new, printing one line per record:

  #<offset> key=<key> [headers={<name>=<value> ...}] payload=<payload>

A payload its producer compressed is shown decompressed, with codec=lz4 or
codec=zstd before it (the JSON lines carry "codec" always). A record that
cannot be decompressed (garbage behind a valid checksum) ends sub with
exit code 3 naming its offset; it stays leased and comes back like any
unacknowledged record.

With --ack each record is acknowledged after it is printed (done for the
group); with --nack it is returned for redelivery after --nack-delay or the
group's backoff; with --term it is settled without the dead-letter queue;
with none of them its lease simply expires (30 s) and the group gets it
again. A record delivered 5 times goes to the stream's dead-letter queue,
readable as the stream .dlq.<stream>.

sub reads every partition of the stream unless --partition names one; order
holds per partition, and a record of a partition other than 0 shows it
(partition=P). --subject PATTERN (tokens separated by dots, * for one token,
> for the rest) delivers only the records whose subject matches; the ranges
it skips are reported as filtered gaps. With --subject and no --stream, sub
spans every stream whose binding can match the pattern (ironbus stream
bind): each line names its stream, and order holds per stream partition
only.

A new group starts at the earliest record the stream still holds, or where
--from (an offset, earliest or latest) or --from-time (RFC 3339) says; an
existing group carries on from its cursor. Gaps (records removed by
retention or lost to damage) are printed as "gap <from>..<to-1>".`

	subExamples = `  ironbus sub --group demo --max 10 --ack
  ironbus sub --stream orders --group billing --max 0 --wait 30s --ack
  ironbus sub --stream orders --group audit --from-time 2026-11-29T00:00:00Z --broadcast --ack
  ironbus sub --stream sensors --group per-device --key-shared --ack
  ironbus sub --stream orders --group retry --nack --nack-delay 10s
  ironbus sub --stream .dlq.orders --group triage --max 0
  ironbus sub --stream orders --partition 2 --group replay --streaming
  ironbus sub --subject 'orders.*.created' --group audit --ack
  ironbus sub --stream orders --subject 'orders.eu.>' --group eu --ack`
)
