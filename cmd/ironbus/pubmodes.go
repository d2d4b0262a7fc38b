package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/internal/lines"
)

// pubChecks are the per-record options of pub that make sense for one
// record only: a message id or an expectation names one record.
type pubChecks struct {
	msgID             string
	expectLast        string // --expect-last-offset: N or none
	expectLastSubject string // --expect-last-subject-offset: N or none
	atomic            bool   // every line of stdin as one atomic batch
	noAck             bool   // fire and forget
}

// single reports whether an option that names one record was given.
func (c *pubChecks) single() bool {
	return c.msgID != "" || c.expectLast != "" || c.expectLastSubject != ""
}

// check refuses combinations that cannot mean anything.
func (c *pubChecks) check(pub *pubOptions, payload *string) error {
	switch {
	case c.single() && payload == nil && !pub.tombstone:
		return exitErrorf(exitUsage, "--msg-id and --expect-* name one record: give the payload as an argument (or use --tombstone)")
	case c.atomic && c.noAck:
		return exitErrorf(exitUsage, "--atomic and --no-ack do not go together: an atomic batch is acknowledged whole")
	case (c.atomic || c.noAck) && (c.single() || pub.tombstone):
		return exitErrorf(exitUsage, "--atomic and --no-ack publish plain records: no --msg-id, --expect-* or --tombstone")
	case c.expectLastSubject != "" && pub.subject == "":
		return exitErrorf(exitUsage, "--expect-last-subject-offset needs --subject: it is about the last record of that subject")
	case (c.expectLast != "" || c.expectLastSubject != "") && pub.partition < 0 && pub.key == "":
		return exitErrorf(exitUsage, "an expectation needs a partition: give --partition, or a --key the partition follows from")
	}
	return nil
}

// apply sets the record options of one record.
func (c *pubChecks) apply(record *client.Record) error {
	record.MessageID = c.msgID
	var err error
	if record.ExpectLastOffset, err = parseExpectation("--expect-last-offset", c.expectLast); err != nil {
		return err
	}
	record.ExpectLastSubjectOffset, err = parseExpectation("--expect-last-subject-offset", c.expectLastSubject)
	return err
}

func parseExpectation(flag, text string) (client.Expectation, error) {
	switch text {
	case "":
		return client.Expectation{}, nil
	case "none":
		return client.ExpectNone(), nil
	}
	offset, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return client.Expectation{}, exitErrorf(exitUsage, "%s %q: want an offset or none", flag, text)
	}
	return client.ExpectOffset(offset), nil
}

// expectationRefused states what a failed expectation found (exit 3).
func expectationRefused(err error) error {
	var expectation *client.ExpectationError
	if !errors.As(err, &expectation) {
		return nil
	}
	actual := "there is no record yet"
	if expectation.HasActual {
		actual = fmt.Sprintf("the last offset is %d", expectation.Actual)
	}
	return exitErrorf(exitRefused, "the record was not stored: the expectation does not hold, %s (expectation_failed)", actual)
}

// publishAtomic publishes every line of stdin as one atomic batch and
// prints their offsets.
func publishAtomic(ctx context.Context, opts *globalOptions, c *client.Client, destination client.Destination, template client.Record, stream string, limit int) error {
	var records []client.Record
	in := lines.NewReader(opts.stdin, limit)
	for number := 1; ; number++ {
		line, err := in.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return exitErrorf(exitUnreadable, "reading line %d of standard input: %w", number, err)
		}
		record := template
		record.Payload = append([]byte(nil), line...)
		records = append(records, record)
	}
	if len(records) == 0 {
		return exitErrorf(exitUsage, "--atomic publishes the lines of standard input, and it held none")
	}
	acks, err := c.PublishBatch(ctx, destination, records)
	if err != nil {
		return brokerError(fmt.Errorf("the batch of %d records was not stored (none of it): %w", len(records), err), stream)
	}
	out := bufio.NewWriter(opts.stdout)
	defer out.Flush()
	for _, ack := range acks {
		printAck(out, opts.stderr, ack, opts.json, stream)
	}
	return nil
}

// publishNoAck sends every record without waiting for (or getting) an
// answer, and says on stderr how many it sent.
func publishNoAck(ctx context.Context, opts *globalOptions, c *client.Client, destination client.Destination, template client.Record, payload *string, limit int) error {
	send := func(line []byte) error {
		record := template
		record.Payload = append([]byte(nil), line...)
		return c.PublishAsync(ctx, destination, record)
	}
	var err error
	if payload != nil {
		err = send([]byte(*payload))
	} else {
		in := lines.NewReader(opts.stdin, limit)
		for {
			line, readErr := in.Next()
			if errors.Is(readErr, io.EOF) {
				break
			}
			if readErr != nil {
				err = exitErrorf(exitUnreadable, "reading standard input: %w", readErr)
				break
			}
			if err = send(line); err != nil {
				break
			}
		}
	}
	if err == nil {
		// Close drops what is still queued: a ping's answer comes after
		// the broker has read every frame before it.
		if _, pingErr := c.Ping(ctx); pingErr != nil {
			err = brokerError(pingErr, "")
		}
	}
	fmt.Fprintf(opts.stderr, "sent %d records without acknowledgement (the broker may drop them under overload, counted in ironbus_no_ack_dropped_total)\n", c.AsyncSent())
	return err
}

// printAck prints one acknowledged record: its bare offset, or a JSON
// line; a duplicate also says so on stderr (and in the JSON).
func printAck(out io.Writer, stderr io.Writer, ack client.Ack, asJSON bool, stream string) {
	if asJSON {
		// Formatted by hand: a line per acknowledgement is the hot path of
		// a bulk publish, and the shape is fixed.
		if ack.Duplicate {
			fmt.Fprintf(out, "{\"schema\":%q,\"stream\":%q,\"partition\":%d,\"offset\":%d,\"duplicate\":true}\n", publishedSchema, stream, ack.Partition, ack.Offset)
		} else {
			fmt.Fprintf(out, "{\"schema\":%q,\"stream\":%q,\"partition\":%d,\"offset\":%d}\n", publishedSchema, stream, ack.Partition, ack.Offset)
		}
	} else {
		fmt.Fprintln(out, ack.Offset)
	}
	if ack.Duplicate {
		fmt.Fprintf(stderr, "duplicate: already stored at offset %d of partition %d; nothing new was stored\n", ack.Offset, ack.Partition)
	}
}
