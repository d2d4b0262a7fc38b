package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/internal/lines"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/subject"
	"github.com/ironbus/ironbus/wire"
)

type pubOptions struct {
	addr      string
	stream    string
	subject   string
	partition int64 // -1: the broker picks it from the key
	routed    bool  // --subject without --stream: route by the bindings
	key       string
	headers   []string
	window    int
	compress  string
	tombstone bool // one tombstone for --key, no payload
	checks    pubChecks
}

func newPubCmd(opts *globalOptions) *cobra.Command {
	pub := &pubOptions{}
	cmd := &cobra.Command{
		Use:   "pub [payload]",
		Short: "Publish records durably and print their offsets",
		Long: `Publish records to a stream and print, for each, the offset at which it is
durable (the broker acknowledges only after fdatasync).

With a payload argument, pub publishes that one record. Without one, it
publishes one record per line of standard input (the newline is not part of
the payload), keeping up to --window records in flight on one connection
(1 = one at a time), and prints the offsets in input order, one bare decimal
per line, as each becomes durable.

With --subject, every record carries that subject. Without --stream, the
subject also picks the stream: the broker stores the record in the stream
whose binding matches it (ironbus stream bind), and refuses it (exit code 3,
no_route) when none does. With --stream, the record goes to that stream and
the subject is only stored with it, for consumers' filters.

In a stream of several partitions, the broker picks each record's partition
from its --key by a stable hash (a record without a key goes to the
connection's own partition), so one key's records stay in order in one
partition; --partition P names the partition instead.

Payloads are compressed with lz4 by default (--compress zstd for smaller
records at more CPU, none to turn it off). A payload is stored compressed
only when that saves at least an eighth of it and it is at least 128 bytes
long; otherwise it is stored as is. Consumers (sub, the SDK) and the offline
readers (peek, dump) decompress transparently.

Errors go to standard error and the exit code is not 0: 5 when the broker
cannot be reached, 6 when it refused the credentials, 3 when it refused a
record (the message says why). A record larger than the broker takes (its
max_frame setting, at most 16 MiB) is refused before it is sent, exit 3: a
payload argument or a line of standard input, which is never read whole
into memory once it passes the limit.

--tombstone publishes exactly one tombstone for --key: a record without a
payload that deletes the key from a compacted stream (ironbus stream create
--compact). It reads no payload and refuses a payload argument or data on
standard input.

Publishing never stores a record twice on a resend: pub is an idempotent
producer (a producer id and a sequence per record; a record the broker
already stored is answered with its first offset), also across a
reconnect. --msg-id adds the application's own key: a second publish with
the same id inside the stream's dedup window (default 2m) stores nothing,
prints the first copy's offset and says "duplicate" on standard error
("duplicate":true with --json).

--expect-last-offset N publishes only if the partition's last record is at
N (none: the partition never had one); --expect-last-subject-offset N only
if the last record of --subject is at N. When it does not hold, nothing is
stored and pub exits 3 naming the actual last offset. Both need a partition
(--partition, or a --key it follows from).

--atomic publishes every line of standard input as one atomic batch: all
of them are stored (one offset per line) or none is. --no-ack sends without
waiting for acknowledgements, for telemetry that may be lost: nothing is
printed per record, and an overloaded broker may drop such records (it
counts them). See docs/PRODUCERS.md.`,
		Example: `  ironbus pub "hello"
  ironbus pub --stream orders --key customer-42 --header source=cli '{"total":12}'
  ironbus pub --subject orders.eu.created --key customer-42 '{"total":12}'
  ironbus pub --stream orders --partition 3 "to partition 3"
  seq 1 100000 | ironbus pub --window 1024 > offsets.txt
  ironbus pub --compress zstd --stream logs < app.log
  ironbus pub --stream latest --key customer-42 --tombstone
  ironbus pub --stream orders --key o-17 --msg-id o-17-created '{"total":12}'
  ironbus pub --stream ledger --partition 0 --expect-last-offset 41 'debit 5'
  printf 'order\nline 1\nline 2\n' | ironbus pub --stream orders --key o-18 --atomic
  ironbus pub --stream metrics --no-ack < readings.txt`,
		Args: cobra.MaximumNArgs(1),
	}
	pub.addFlags(cmd, opts)
	cmd.RunE = classified(func() error {
		var payload *string
		if len(cmd.Flags().Args()) == 1 {
			payload = &cmd.Flags().Args()[0]
		}
		pub.routed = pub.subject != "" && !cmd.Flags().Changed("stream")
		if err := pub.checkTombstone(payload, opts.stdin); err != nil {
			return err
		}
		if err := pub.checks.check(pub, payload); err != nil {
			return err
		}
		return runPub(cmd.Context(), opts, pub, payload)
	})
	return cmd
}

// addFlags registers pub's flags.
func (pub *pubOptions) addFlags(cmd *cobra.Command, opts *globalOptions) {
	flags := cmd.Flags()
	addAddrFlag(cmd, &pub.addr)
	flags.StringVar(&pub.stream, "stream", segment.DefaultStream, "stream to publish to")
	flags.StringVar(&pub.subject, "subject", "", "record subject; without --stream it also routes the record by the stream bindings")
	flags.Int64Var(&pub.partition, "partition", -1, "partition to publish to (default: the broker picks it from the key)")
	flags.StringVar(&pub.key, "key", "", "record key")
	flags.StringArrayVar(&pub.headers, "header", nil, "record header name=value (repeatable)")
	flags.IntVar(&pub.window, "window", 64, "records in flight at once (1 = one at a time)")
	flags.StringVar(&pub.compress, "compress", "lz4", "payload compression: lz4, zstd or none (kept only when it saves an eighth)")
	flags.BoolVar(&pub.tombstone, "tombstone", false, "publish one tombstone for --key (deletes the key from a compacted stream); reads no payload")
	flags.StringVar(&pub.checks.msgID, "msg-id", "", "message id of the one record: a second publish of it inside the stream's dedup window stores nothing and prints the first one's offset")
	flags.StringVar(&pub.checks.expectLast, "expect-last-offset", "", "publish only if the partition's last offset is N (none: it never had a record); else exit 3 with the actual one")
	flags.StringVar(&pub.checks.expectLastSubject, "expect-last-subject-offset", "", "publish only if the last record of --subject is at N (none: no record of it yet); else exit 3")
	flags.BoolVar(&pub.checks.atomic, "atomic", false, "publish every line of standard input as one atomic batch: all stored, or none")
	flags.BoolVar(&pub.checks.noAck, "no-ack", false, "fire and forget: send without waiting for acknowledgements (the broker may drop records under overload, counted)")
	flags.BoolVar(&opts.json, "json", false, `print one JSON object per record ({"schema":"`+publishedSchema+`","stream":S,"partition":P,"offset":N}) instead of bare offsets`)
}

// addAddrFlag adds --addr with its IRONBUS_ADDR default.
func addAddrFlag(cmd *cobra.Command, target *string) {
	def := defaultAddr
	if env := os.Getenv("IRONBUS_ADDR"); env != "" {
		def = env
	}
	cmd.Flags().StringVar(target, "addr", def, "broker address host:port, or a cluster's seed list a:7001,b:7002 (also IRONBUS_ADDR, or the current context's)")
	markContextFlag(cmd, "addr", contextAddr)
	markClientVerb(cmd) // root gives it the TLS and credential flags (connect.go)
}

func runPub(ctx context.Context, opts *globalOptions, pub *pubOptions, payload *string) error {
	if pub.window < 1 {
		return exitErrorf(exitUsage, "--window must be at least 1")
	}
	template, err := pub.record()
	if err != nil {
		return err
	}
	if err := pub.checks.apply(&template); err != nil {
		return err
	}
	destination, err := pub.destination()
	if err != nil {
		return err
	}
	compression, err := client.ParseCompression(pub.compress)
	if err != nil {
		return exitErrorf(exitUsage, "--compress %q: want lz4, zstd or none", pub.compress)
	}
	c, err := dialBroker(ctx, opts, pub.addr, pub.window)
	if err != nil {
		return err
	}
	defer c.Close()
	stream := pub.stream
	if pub.routed {
		stream = routedStream(ctx, c, pub.subject)
	}
	switch {
	case pub.checks.atomic:
		return publishAtomic(ctx, opts, c, destination, template, stream, c.ServerInfo().LargestPayload())
	case pub.checks.noAck:
		return publishNoAck(ctx, opts, c, destination, template, payload, c.ServerInfo().LargestPayload())
	}
	producer := c.NewProducerTo(destination, client.ProducerOptions{Window: pub.window, Compression: compression})
	printed := make(chan error, 1)
	go func() { printed <- printOffsets(opts.stdout, opts.stderr, producer.Results(), opts.json, stream) }()
	var sendErr error
	if pub.tombstone {
		template.Tombstone = true
		sendErr = producer.Send(ctx, template)
	} else {
		sendErr = sendRecords(ctx, producer, template, payload, opts.stdin, c.ServerInfo().LargestPayload())
	}
	if sendErr != nil {
		sendErr = brokerError(sendErr, stream)
	}
	closeErr := producer.Close()
	printErr := <-printed
	return firstError(printErr, sendErr, closeErr)
}

// destination turns --stream, --subject and --partition into where the
// records go.
func (pub *pubOptions) destination() (client.Destination, error) {
	switch {
	case pub.partition < -1 || pub.partition >= wire.MaxPartitions:
		return client.Destination{}, exitErrorf(exitUsage, "--partition %d: want 0 to %d", pub.partition, wire.MaxPartitions-1)
	case pub.routed && pub.partition >= 0:
		return client.Destination{}, exitErrorf(exitUsage, "--partition needs --stream: a subject-routed record goes to the partition of its key")
	case pub.routed:
		return client.BySubject(), nil
	case pub.partition >= 0:
		return client.ToPartition(pub.stream, uint32(pub.partition)), nil
	}
	return client.ToStream(pub.stream), nil
}

func (pub *pubOptions) record() (client.Record, error) {
	record := client.Record{Subject: pub.subject}
	if pub.subject != "" {
		if err := subject.Validate([]byte(pub.subject)); err != nil {
			return record, exitErrorf(exitUsage, "--subject %q: %v (dot-separated tokens, no wildcards)", pub.subject, err)
		}
	}
	if pub.key != "" {
		record.Key = []byte(pub.key)
	}
	for _, header := range pub.headers {
		name, value, ok := strings.Cut(header, "=")
		if !ok || name == "" {
			return record, exitErrorf(exitUsage, "--header %q: want name=value", header)
		}
		record.Headers = append(record.Headers, client.Header{Name: name, Value: []byte(value)})
	}
	return record, nil
}

// checkTombstone refuses --tombstone without --key or with a payload.
func (pub *pubOptions) checkTombstone(payload *string, stdin io.Reader) error {
	switch {
	case !pub.tombstone:
		return nil
	case pub.key == "":
		return exitErrorf(exitUsage, "--tombstone needs --key: a tombstone deletes one key")
	case payload != nil:
		return exitErrorf(exitUsage, "--tombstone takes no payload argument: a tombstone has no payload")
	case stdinHasData(stdin):
		return exitErrorf(exitUsage, "--tombstone reads no payload, but standard input holds data; publish the tombstone without piping into it")
	}
	return nil
}

// stdinHasData reports whether standard input holds data, without waiting
// on a terminal or on a pipe nobody writes to: a terminal or /dev/null
// holds none, a file what its size says, and anything else what arrives
// within a moment.
func stdinHasData(in io.Reader) bool {
	if file, ok := in.(*os.File); ok {
		info, err := file.Stat()
		switch {
		case err != nil || info.Mode()&os.ModeCharDevice != 0:
			return false
		case info.Mode().IsRegular():
			return info.Size() > 0
		}
	}
	got := make(chan bool, 1)
	go func() {
		var one [1]byte
		n, _ := in.Read(one[:])
		got <- n > 0
	}()
	select {
	case has := <-got:
		return has
	case <-time.After(100 * time.Millisecond):
		return false
	}
}

// sendRecords sends the payload argument, or one record per stdin line.
// A line longer than limit is refused before it is read whole, so a
// stray binary file costs no more memory than one record.
func sendRecords(ctx context.Context, producer *client.Producer, template client.Record, payload *string, stdin io.Reader, limit int) error {
	send := func(line []byte) error {
		record := template
		record.Payload = append([]byte(nil), line...)
		return producer.Send(ctx, record)
	}
	if payload != nil {
		if len(*payload) > limit {
			return exitErrorf(exitRefused, "the payload of %d bytes is larger than the largest record the broker takes (%d bytes); %s",
				len(*payload), limit, recordLimitHint)
		}
		return send([]byte(*payload))
	}
	in := lines.NewReader(stdin, limit)
	for number := 1; ; number++ {
		line, err := in.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, lines.ErrTooLong):
			return exitErrorf(exitRefused, "line %d of standard input is longer than the largest record the broker takes (%d bytes); %s",
				number, limit, recordLimitHint)
		case err != nil:
			return exitErrorf(exitUnreadable, "reading standard input: %w", err)
		}
		if err := send(line); err != nil {
			return err
		}
	}
}

// publishedSchema names one line of pub --json, one per acknowledged record.
const publishedSchema = "ironbus.cli.published.v1"

// printOffsets prints each durable offset in send order; the first failed
// record ends publishing with its error.
// stream is the stream they go to, "" when it is not known (a routed
// record whose binding could not be read).
func printOffsets(w, stderr io.Writer, results <-chan client.Result, asJSON bool, stream string) error {
	out := bufio.NewWriter(w)
	defer out.Flush()
	var failure error
	for result := range results {
		if result.Err != nil {
			if failure == nil {
				failure = refusedError(result.Sequence, result.Err, stream)
			}
			continue
		}
		if failure == nil {
			printAck(out, stderr, result.Ack, asJSON, stream)
			if len(results) == 0 {
				_ = out.Flush()
			}
		}
	}
	return failure
}

// refusedError classifies the failure of one record (brokerError).
func refusedError(sequence uint64, err error, stream string) error {
	if refused := expectationRefused(err); refused != nil {
		return refused
	}
	return brokerError(fmt.Errorf("record %d was not stored: %w", sequence+1, err), stream)
}

// dialBroker connects, mapping failures to exit code 5 with advice.
func dialBroker(ctx context.Context, opts *globalOptions, addr string, window int) (*client.Client, error) {
	options := client.Options{ClientName: "ironbus-cli", Window: window}
	if err := opts.connect.apply(&options); err != nil {
		return nil, err
	}
	c, err := client.Dial(ctx, addr, options)
	if err != nil {
		if refused := connectRefusal(addr, err); refused != nil {
			return nil, refused
		}
		return nil, exitErrorf(exitUnreachable, "cannot reach a broker at %s: %w (is `ironbus serve` or `ironbus dev` running? --addr or IRONBUS_ADDR picks another)", addr, err)
	}
	return c, nil
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// publishLines publishes lines through a pipelined producer and waits for
// every result (used by `ironbus dev --seed`).
func publishLines(ctx context.Context, addr, stream string, lines []string, window int) error {
	c, err := dialBroker(ctx, &globalOptions{}, addr, window)
	if err != nil {
		return err
	}
	defer c.Close()
	producer := c.NewProducer(stream, client.ProducerOptions{Window: window})
	done := make(chan error, 1)
	go func() { done <- printOffsets(io.Discard, io.Discard, producer.Results(), false, stream) }()
	for _, line := range lines {
		if err := producer.Send(ctx, client.Record{Payload: []byte(line)}); err != nil {
			break
		}
	}
	closeErr := producer.Close()
	return firstError(<-done, closeErr)
}
