package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/segment"
)

type subOptions struct {
	addr      string
	stream    string
	group     string
	max       int
	ack       bool
	nack      bool
	term      bool
	nackDelay time.Duration
	wait      time.Duration
	keyShared bool
	broadcast bool
	streaming bool
	from      string
	fromTime  string
}

func newSubCmd(opts *globalOptions) *cobra.Command {
	sub := &subOptions{}
	cmd := &cobra.Command{
		Use:   "sub --group G [--max N] [--ack|--nack|--term] [--key-shared|--broadcast|--streaming] [--from POS]",
		Short: "Consume records as a member of a group",
		Long: `Consume records from a stream as a member of a group.

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

  #<offset> key=<key> payload=<payload>

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

A new group starts at the earliest record the stream still holds, or where
--from (an offset, earliest or latest) or --from-time (RFC 3339) says; an
existing group carries on from its cursor. Gaps (records removed by
retention or lost to damage) are printed as "gap <from>..<to-1>".`,
		Example: `  ironbus sub --group demo --max 10 --ack
  ironbus sub --stream orders --group billing --max 0 --wait 30s --ack
  ironbus sub --stream orders --group audit --from-time 2026-11-29T00:00:00Z --broadcast --ack
  ironbus sub --stream sensors --group per-device --key-shared --ack
  ironbus sub --stream orders --group retry --nack --nack-delay 10s
  ironbus sub --stream .dlq.orders --group triage --max 0`,
		Args: cobra.NoArgs,
	}
	flags := cmd.Flags()
	addAddrFlag(cmd, &sub.addr)
	flags.StringVar(&sub.stream, "stream", segment.DefaultStream, "stream to consume")
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
	flags.BoolVar(&opts.json, "json", false, "print NDJSON: one object per record (schema "+deliverySchema+") or gap ("+gapSchema+")")
	cmd.RunE = classified(func() error { return runSub(cmd.Context(), opts, sub) })
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
	defer c.Close()
	if _, err := c.OpenGroup(ctx, sub.stream, sub.group, groupOptions); err != nil {
		return subError(err)
	}
	printed := 0
	for sub.max == 0 || printed < sub.max {
		want := 100
		if sub.max > 0 {
			want = min(want, sub.max-printed)
		}
		result, err := c.Fetch(ctx, sub.stream, sub.group, client.FetchOptions{Type: groupOptions.Type, MaxRecords: want, Wait: sub.wait})
		if err != nil {
			return subError(err)
		}
		for _, gap := range result.Gaps {
			if opts.json {
				_ = writeJSON(opts.stdout, newGapOutput(gap.From, gap.To, gap.Reason))
				continue
			}
			fmt.Fprintf(opts.stdout, "gap %d..%d (%s)\n", gap.From, gap.To-1, gap.Reason)
		}
		if len(result.Messages) == 0 {
			if len(result.Gaps) == 0 {
				return nil // --wait passed with nothing new
			}
			continue
		}
		for _, message := range result.Messages {
			if opts.json {
				_ = writeJSON(opts.stdout, messageOutput(message))
				continue
			}
			fmt.Fprintln(opts.stdout, messageLine(message))
		}
		printed += len(result.Messages)
		if err := sub.settle(ctx, c, result.Messages); err != nil {
			return err
		}
	}
	return nil
}

func messageLine(m client.Message) string {
	var line strings.Builder
	fmt.Fprintf(&line, "#%d key=%s", m.Offset, humanField(m.Key))
	if m.Codec != client.CodecNone {
		fmt.Fprintf(&line, " codec=%s", m.Codec)
	}
	fmt.Fprintf(&line, " payload=%s", humanPayload(m.Payload))
	if m.Redelivered {
		fmt.Fprintf(&line, " (attempt %d)", m.Attempt)
	}
	return line.String()
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
	case sub.max < 0:
		return group, exitErrorf(exitUsage, "--max must be 0 (no limit) or more")
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
// and streaming groups --ack moves the group's position past it.
func (sub *subOptions) settle(ctx context.Context, c *client.Client, messages []client.Message) error {
	var err error
	last := messages[len(messages)-1]
	switch {
	case sub.ack && sub.broadcast:
		_, err = c.CumulativeAck(ctx, sub.stream, sub.group, last.Partition, last.Offset+1)
	case sub.ack && sub.streaming:
		_, err = c.Commit(ctx, sub.stream, sub.group, last.Partition, last.Offset+1)
	case sub.ack:
		_, err = c.Ack(ctx, sub.stream, sub.group, messages...)
	case sub.nack:
		delay := sub.nackDelay
		if delay == 0 {
			delay = -1 // the group's backoff
		}
		_, err = c.Nack(ctx, sub.stream, sub.group, delay, messages...)
	case sub.term:
		_, err = c.Term(ctx, sub.stream, sub.group, messages...)
	}
	if err != nil {
		return subError(err)
	}
	return nil
}

func subError(err error) error {
	if errors.Is(err, client.ErrClosed) {
		return exitErrorf(exitLocked, "the connection to the broker broke: %w", err)
	}
	return exitErrorf(exitDamage, "%w", err)
}

// deliverySchema names one record line of sub --json: a delivery, not a
// stored record, so it carries the attempt and redelivery of this group.
const deliverySchema = "ironbus.cli.delivery.v1"

// subMessage is one record in sub's NDJSON output.
type subMessage struct {
	Schema          string `json:"schema"`
	Offset          uint64 `json:"offset"`
	Partition       uint32 `json:"partition"`
	Timestamp       string `json:"timestamp"`
	Attempt         uint32 `json:"attempt"`
	Redelivered     bool   `json:"redelivered"`
	Key             string `json:"key"`
	KeyEncoding     string `json:"key_encoding"`
	Subject         string `json:"subject"`
	Payload         string `json:"payload"`
	PayloadEncoding string `json:"payload_encoding"`
	Codec           string `json:"codec"` // how it was stored; Payload is decompressed
}

func messageOutput(m client.Message) subMessage {
	key, keyEncoding := encodeBytes(m.Key)
	payload, payloadEncoding := encodeBytes(m.Payload)
	return subMessage{Schema: deliverySchema, Offset: m.Offset, Partition: m.Partition, Timestamp: m.Timestamp.UTC().Format(time.RFC3339Nano),
		Attempt: m.Attempt, Redelivered: m.Redelivered, Key: key, KeyEncoding: keyEncoding, Subject: m.Subject,
		Payload: payload, PayloadEncoding: payloadEncoding, Codec: m.Codec.String()}
}
