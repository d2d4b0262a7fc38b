package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/segment"
)

type subOptions struct {
	addr   string
	stream string
	group  string
	max    int
	ack    bool
	nack   bool
	wait   time.Duration
}

func newSubCmd(opts *globalOptions) *cobra.Command {
	sub := &subOptions{}
	cmd := &cobra.Command{
		Use:   "sub --group G [--max N] [--ack|--nack] [--wait DURATION]",
		Short: "Consume records as a member of a work group",
		Long: `Consume records from a stream as a member of a work group.

Members of one group share its records: each record is leased to one member
at a time. sub keeps fetching until it has printed --max records (0 = no
limit) or --wait passes with nothing new, printing one line per record:

  #<offset> key=<key> payload=<payload>

With --ack each record is acknowledged after it is printed (done for the
group); with --nack it is returned for redelivery after the group's backoff;
with neither, its lease simply expires (30 s) and the group gets it again.
A new group starts at the earliest record the stream still holds. Gaps (records
removed by retention or lost to damage) are printed as "gap <from>..<to-1>".`,
		Example: `  ironbus sub --group demo --max 10 --ack
  ironbus sub --stream orders --group billing --max 0 --wait 30s --ack`,
		Args: cobra.NoArgs,
	}
	flags := cmd.Flags()
	addAddrFlag(cmd, &sub.addr)
	flags.StringVar(&sub.stream, "stream", segment.DefaultStream, "stream to consume")
	flags.StringVar(&sub.group, "group", "", "work group to consume as (required)")
	flags.IntVar(&sub.max, "max", 10, "stop after this many records (0 = no limit)")
	flags.BoolVar(&sub.ack, "ack", false, "acknowledge each record after printing it")
	flags.BoolVar(&sub.nack, "nack", false, "return each record for redelivery after printing it")
	flags.DurationVar(&sub.wait, "wait", 5*time.Second, "stop when nothing new arrives for this long")
	flags.BoolVar(&opts.json, "json", false, "print NDJSON: one object per record or gap")
	cmd.RunE = classified(func() error { return runSub(cmd.Context(), opts, sub) })
	return cmd
}

func runSub(ctx context.Context, opts *globalOptions, sub *subOptions) error {
	switch {
	case sub.group == "":
		return exitErrorf(exitUsage, "--group is required: members of one group share its records")
	case sub.ack && sub.nack:
		return exitErrorf(exitUsage, "--ack and --nack exclude each other")
	case sub.max < 0:
		return exitErrorf(exitUsage, "--max must be 0 (no limit) or more")
	}
	c, err := dialBroker(ctx, sub.addr, 1)
	if err != nil {
		return err
	}
	defer c.Close()
	printed := 0
	for sub.max == 0 || printed < sub.max {
		want := 100
		if sub.max > 0 {
			want = min(want, sub.max-printed)
		}
		result, err := c.Fetch(ctx, sub.stream, sub.group, client.FetchOptions{MaxRecords: want, Wait: sub.wait})
		if err != nil {
			return subError(err)
		}
		for _, gap := range result.Gaps {
			if opts.json {
				_ = writeJSON(opts.stdout, gapOutput{Gap: gapRange{From: gap.From, To: gap.To, Reason: gap.Reason}})
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
	fmt.Fprintf(&line, "#%d key=%s payload=%s", m.Offset, humanField(m.Key), humanPayload(m.Payload))
	if m.Redelivered {
		fmt.Fprintf(&line, " (attempt %d)", m.Attempt)
	}
	return line.String()
}

// settle acks or nacks what was printed, as asked.
func (sub *subOptions) settle(ctx context.Context, c *client.Client, messages []client.Message) error {
	var err error
	switch {
	case sub.ack:
		_, err = c.Ack(ctx, sub.stream, sub.group, messages...)
	case sub.nack:
		_, err = c.Nack(ctx, sub.stream, sub.group, -1, messages...)
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

// subMessage is one record in sub's NDJSON output.
type subMessage struct {
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
}

func messageOutput(m client.Message) subMessage {
	key, keyEncoding := encodeBytes(m.Key)
	payload, payloadEncoding := encodeBytes(m.Payload)
	return subMessage{Offset: m.Offset, Partition: m.Partition, Timestamp: m.Timestamp.UTC().Format(time.RFC3339Nano),
		Attempt: m.Attempt, Redelivered: m.Redelivered, Key: key, KeyEncoding: keyEncoding, Subject: m.Subject,
		Payload: payload, PayloadEncoding: payloadEncoding}
}
