package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/internal/units"
)

// ironbus stream: named streams and subject bindings, live through a
// broker's StreamAdmin (--addr) or offline on a stopped broker's data
// directory (--data-dir, streamoffline.go). Both paths print the same
// rows.

// streamOptions are the flags every stream verb shares.
type streamOptions struct {
	addr    string
	dataDir string
	force   bool
}

// streamsOutput is the --json envelope of every stream verb.
type streamsOutput struct {
	Schema   string       `json:"schema"`
	Streams  []streamRow  `json:"streams"`
	Bindings []bindingRow `json:"bindings"`
}

type streamRow struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	Created    string `json:"created,omitempty"`
	MaxBytes   uint64 `json:"max_bytes"`
	MaxAge     string `json:"max_age"`
	MaxRecords uint64 `json:"max_records"`
	// DedupWindow: how long message ids are remembered ("off"; empty
	// when the broker did not say).
	DedupWindow string         `json:"dedup_window,omitempty"`
	Groups      int            `json:"groups"`
	Records     uint64         `json:"records"`
	Bytes       uint64         `json:"bytes"`
	Offsets     []partitionRow `json:"partition_offsets"`
	// Compact: the stream keeps the latest record per key; its tombstones
	// stay for DeleteRetention (empty when it is not compacted).
	Compact           bool   `json:"compact"`
	DeleteRetention   string `json:"delete_retention,omitempty"`
	CompactPastGroups bool   `json:"compact_past_groups,omitempty"`
	// Replicas is the replication factor of a replicated stream (absent
	// for one copy).
	Replicas int `json:"replicas,omitempty"`
}

type partitionRow struct {
	Partition int    `json:"partition"`
	First     uint64 `json:"first"`
	End       uint64 `json:"end"`
	Bytes     uint64 `json:"bytes"`
}

type bindingRow struct {
	Pattern string `json:"pattern"`
	Stream  string `json:"stream"`
}

const streamsSchema = "ironbus.cli.streams.v1"

func newStreamCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stream create|ls|info|purge|rm|bind|unbind|compact",
		Short: "Create, list, purge and remove named streams; bind subjects to them",
		Long: `A stream is a named, durable, ordered log split into partitions (1 to 1024).
A record's key picks its partition by a stable hash (docs/STREAMS.md), so
every record of one key stays in order on one partition. Publishing to a
name that does not exist creates it with one partition; create it first to
choose its partitions and retention.

A binding routes subjects to a stream: publishing with a subject (pub
--subject) goes to the one stream whose pattern matches it. '*' matches
one token, '>' the rest. Two bindings some subject could match both, for
different streams, are refused when the second is made.

Without --data-dir the verbs ask the running broker at --addr (the admin
capability). With --data-dir they change a stopped broker's directory
(exit 5 while a broker holds it). purge and rm destroy records: they need
--force.`,
		Example: `  ironbus stream create orders --partitions 8 --max-age 7d
  ironbus stream bind 'orders.>' orders
  ironbus stream ls
  ironbus stream info orders --json
  ironbus stream purge orders --force
  ironbus stream rm orders --force
  ironbus stream ls --data-dir ./data
  ironbus stream create latest --compact --delete-retention 24h`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newStreamCreateCmd(opts), newStreamListCmd(opts), newStreamInfoCmd(opts), newStreamPurgeCmd(opts),
		newStreamRemoveCmd(opts), newStreamBindCmd(opts), newStreamUnbindCmd(opts), newStreamCompactCmd(opts))
	return cmd
}

func addStreamFlags(cmd *cobra.Command, opts *globalOptions, stream *streamOptions, what string) {
	addAddrFlag(cmd, &stream.addr)
	cmd.Flags().StringVar(&stream.dataDir, "data-dir", "", "change a stopped broker's data directory instead of asking the broker at --addr")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+streamsSchema+"): "+what)
}

func addForceFlag(cmd *cobra.Command, stream *streamOptions) {
	cmd.Flags().BoolVar(&stream.force, "force", false, "confirm: records are destroyed and cannot be recovered")
}

type streamCreateOptions struct {
	streamOptions
	partitions uint32
	maxBytes   int64
	maxAge     string
	maxRecords uint64
	// dedupWindow is --dedup-window as typed ("" when not given).
	dedupWindow string
	compact     bool
	deleteAge   string // --delete-retention
	pastGroups  bool   // --compact-past-groups
	replicas    int    // --replicas
}

func newStreamCreateCmd(opts *globalOptions) *cobra.Command {
	create := &streamCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME [--partitions N] [--max-bytes SIZE] [--max-age D] [--max-records N] [--dedup-window D] [--compact [--delete-retention D]]",
		Short: "Create a stream with its partitions and retention",
		Long: `Create a stream. --partitions (1 to 1024, default 1) is fixed for the
stream's life: the key hash maps keys to partitions by the count. The
retention bounds apply to each partition; an unset bound takes the
broker's default (serve --retention-*). --dedup-window is how long the
stream remembers message ids (pub --msg-id): a second publish of an id
inside it stores nothing and answers the first one's offset (default 2m,
at most 24h, 0 turns it off).

--compact makes a stream of latest state per key: sealed segments keep only
the latest record of each key (records without a key all stay), and a
tombstone (pub --key K --tombstone) stays for --delete-retention (default
24h) before it goes too. Offsets never change. Records a consumer group has
not committed are kept unless --compact-past-groups. See
docs/PRODUCERS.md (Key compaction).

Creating a stream that exists with the same settings is not an error (a
script may run it every time); other settings are refused (exit 3).`,
		Example: `  ironbus stream create orders --partitions 8
  ironbus stream create clicks --partitions 16 --max-bytes 10GiB --max-age 3d
  ironbus stream create audit --max-records 1000000 --json
  ironbus stream create payments --dedup-window 10m
  ironbus stream create latest --compact --delete-retention 6h
  ironbus stream create orders --partitions 8 --data-dir ./data`,
		Args: exactArgs(1, "NAME"),
	}
	addStreamFlags(cmd, opts, &create.streamOptions, "the stream")
	cmd.Flags().Uint32Var(&create.partitions, "partitions", 1, "partitions, 1 to 1024 (fixed once created)")
	cmd.Flags().Var(sizeValue{&create.maxBytes}, "max-bytes", "retention: bytes kept per partition (64MiB, 10GiB); unset takes the broker's default")
	cmd.Flags().Var(sizeValue{&create.maxBytes}, "retention-bytes", "the same as --max-bytes")
	cmd.Flags().StringVar(&create.maxAge, "max-age", "", "retention: age of records kept (90m, 72h, 7d); unset takes the broker's default")
	cmd.Flags().Uint64Var(&create.maxRecords, "max-records", 0, "retention: records kept per partition; unset takes the broker's default")
	cmd.Flags().StringVar(&create.dedupWindow, "dedup-window", "", "how long message ids are remembered (30s, 10m, 24h at most; 0 turns message-id dedup off); unset: 2m")
	cmd.Flags().BoolVar(&create.compact, "compact", false, "keep only the latest record per key in sealed segments")
	cmd.Flags().StringVar(&create.deleteAge, "delete-retention", "", "with --compact: how long tombstones stay (90m, 24h, 7d); unset: 24h")
	cmd.Flags().BoolVar(&create.pastGroups, "compact-past-groups", false, "with --compact: compaction may remove records consumer groups have not committed")
	cmd.Flags().IntVar(&create.replicas, "replicas", 1,
		"copies of each partition on distinct nodes of a cluster (1 to 7; more than 1 needs a broker started with --node-id); an ack then means a majority of them hold the record")
	cmd.RunE = classified(func() error { return runStreamCreate(cmd.Context(), opts, create, cmd.Flags().Arg(0)) })
	return cmd
}

// exactArgs is cobra.ExactArgs with a usage error naming the arguments.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return exitErrorf(exitUsage, "%s takes %s (%d argument(s)), got %d; see --help", cmd.CommandPath(), names, n, len(args))
		}
		return nil
	}
}

func runStreamCreate(ctx context.Context, opts *globalOptions, create *streamCreateOptions, name string) error {
	age, err := units.ParseAge(create.maxAge)
	if err != nil {
		return exitErrorf(exitUsage, "--max-age %q: want a duration like 90m, 72h or 7d", create.maxAge)
	}
	if create.partitions < 1 || create.partitions > 1024 {
		return exitErrorf(exitUsage, "--partitions %d: want 1 to 1024", create.partitions)
	}
	window, err := dedupWindowFlag(create.dedupWindow)
	if err != nil {
		return err
	}
	deleteAge, err := units.ParseAge(create.deleteAge)
	switch {
	case err != nil:
		return exitErrorf(exitUsage, "--delete-retention %q: want a duration like 90m, 24h or 7d", create.deleteAge)
	case (create.deleteAge != "" || create.pastGroups) && !create.compact:
		return exitErrorf(exitUsage, "--delete-retention and --compact-past-groups need --compact")
	}
	if create.replicas < 1 || create.replicas > 7 {
		return exitErrorf(exitUsage, "--replicas %d: want 1 to 7", create.replicas)
	}
	if create.replicas > 1 && create.dataDir != "" {
		return exitErrorf(exitUsage, "--replicas needs a running cluster (--addr), not --data-dir: the cluster places the partitions")
	}
	settings := client.StreamSettings{Partitions: create.partitions, MaxBytes: uint64(create.maxBytes), MaxAge: age, MaxRecords: create.maxRecords,
		Compact: create.compact, DeleteRetention: deleteAge, CompactPastGroups: create.pastGroups, Replicas: create.replicas}
	if err := validateStream(name); err != nil {
		return err
	}
	var out streamsOutput
	if create.dataDir != "" {
		out, err = offlineCreate(opts, create.dataDir, name, settings, window)
	} else {
		settings.DedupWindow = window
		out, err = liveStream(ctx, opts, create.addr, name, func(c *client.Client) (client.StreamState, error) {
			return c.CreateStream(ctx, name, settings)
		})
	}
	if err != nil {
		return err
	}
	return printStreams(opts, out, "created")
}

// dedupWindowFlag reads --dedup-window as the catalog keeps it: zero for
// the default (unset), catalog.DedupOff for 0.
func dedupWindowFlag(text string) (time.Duration, error) {
	if text == "" {
		return 0, nil
	}
	window, err := units.ParseAge(text)
	switch {
	case err != nil:
		return 0, exitErrorf(exitUsage, "--dedup-window %q: want a duration like 30s, 10m or 24h (0 turns message-id dedup off)", text)
	case window > catalog.MaxDedupWindow:
		return 0, exitErrorf(exitUsage, "--dedup-window %s: at most %v (every id inside the window is kept on disk)", text, catalog.MaxDedupWindow)
	case window > 0 && window < time.Millisecond:
		return 0, exitErrorf(exitUsage, "--dedup-window %s: at least 1ms (0 turns message-id dedup off)", text)
	case window == 0:
		return catalog.DedupOff, nil
	}
	return window.Truncate(time.Millisecond), nil
}

// dedupText shows a message-id window.
func dedupText(window time.Duration) string {
	if window == 0 {
		return "off"
	}
	return window.String()
}

func newStreamListCmd(opts *globalOptions) *cobra.Command {
	stream := &streamOptions{}
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the streams and the subject bindings",
		Long: `List every stream: its partitions, the records and bytes it holds, its
retention bounds and consumer groups; then every subject binding.`,
		Example: `  ironbus stream ls
  ironbus stream ls --json
  ironbus stream ls --data-dir ./data`,
		Args: cobra.NoArgs,
	}
	addStreamFlags(cmd, opts, stream, "every stream and binding")
	cmd.RunE = classified(func() error {
		var out streamsOutput
		var err error
		if stream.dataDir != "" {
			out, err = offlineList(opts, stream.dataDir, "")
		} else {
			out, err = liveList(cmd.Context(), opts, stream.addr)
		}
		if err != nil {
			return err
		}
		return printStreams(opts, out, "")
	})
	return cmd
}

func newStreamInfoCmd(opts *globalOptions) *cobra.Command {
	stream := &streamOptions{}
	cmd := &cobra.Command{
		Use:   "info NAME",
		Short: "Show one stream: partitions, offsets, retention, bindings",
		Long: `Show one stream: per partition the first offset it still holds, its
committed end and its bytes on disk; its retention bounds, groups and the
subject patterns bound to it. A stream that does not exist exits 2.`,
		Example: `  ironbus stream info orders
  ironbus stream info orders --json
  ironbus stream info orders --data-dir ./data`,
		Args: exactArgs(1, "NAME"),
	}
	addStreamFlags(cmd, opts, stream, "the stream")
	cmd.RunE = classified(func() error {
		name := cmd.Flags().Arg(0)
		if err := validateStream(name); err != nil {
			return err
		}
		var out streamsOutput
		var err error
		if stream.dataDir != "" {
			out, err = offlineList(opts, stream.dataDir, name)
		} else {
			out, err = liveStream(cmd.Context(), opts, stream.addr, name, func(c *client.Client) (client.StreamState, error) {
				return c.StreamInfo(cmd.Context(), name)
			})
		}
		if err != nil {
			return err
		}
		return printStreams(opts, out, "")
	})
	return cmd
}

func newStreamPurgeCmd(opts *globalOptions) *cobra.Command {
	stream := &streamOptions{}
	cmd := &cobra.Command{
		Use:   "purge NAME --force",
		Short: "Drop every record of a stream (offsets keep rising)",
		Long: `Drop every record of every partition of a stream. The stream, its
settings, bindings and groups stay; offsets keep rising from where they
were, and a group behind the purge point gets a retention gap advisory and
goes on from the end. Needs --force.`,
		Example: `  ironbus stream purge orders --force
  ironbus stream purge orders --force --data-dir ./data`,
		Args: exactArgs(1, "NAME"),
	}
	addStreamFlags(cmd, opts, stream, "the stream after the purge")
	addForceFlag(cmd, stream)
	cmd.RunE = classified(func() error { return runStreamDestroy(cmd.Context(), opts, stream, cmd.Flags().Arg(0), true) })
	return cmd
}

func newStreamRemoveCmd(opts *globalOptions) *cobra.Command {
	stream := &streamOptions{}
	cmd := &cobra.Command{
		Use:   "rm NAME --force",
		Short: "Delete a stream with its groups, dead letters and bindings",
		Long: `Delete a stream: every partition with its records, its consumer groups and
their checkpoints, its dead-letter queue and the subject bindings to it.
Refused (exit 3) while a group of the stream has live consumers. Needs
--force. Publishing to the name afterwards creates a new, empty stream.`,
		Example: `  ironbus stream rm scratch --force
  ironbus stream rm scratch --force --json
  ironbus stream rm scratch --force --data-dir ./data`,
		Args: exactArgs(1, "NAME"),
	}
	addStreamFlags(cmd, opts, stream, "the stream as it was")
	addForceFlag(cmd, stream)
	cmd.RunE = classified(func() error { return runStreamDestroy(cmd.Context(), opts, stream, cmd.Flags().Arg(0), false) })
	return cmd
}

func runStreamDestroy(ctx context.Context, opts *globalOptions, stream *streamOptions, name string, purge bool) error {
	verb := "rm"
	if purge {
		verb = "purge"
	}
	if !stream.force {
		return exitErrorf(exitUsage, "stream %s destroys every record of %q and cannot be undone: add --force to confirm", verb, name)
	}
	if err := validateStream(name); err != nil {
		return err
	}
	var out streamsOutput
	var err error
	switch {
	case stream.dataDir != "":
		out, err = offlineDestroy(opts, stream.dataDir, name, purge)
	case purge:
		out, err = liveStream(ctx, opts, stream.addr, name, func(c *client.Client) (client.StreamState, error) { return c.PurgeStream(ctx, name) })
	default:
		out, err = liveStream(ctx, opts, stream.addr, name, func(c *client.Client) (client.StreamState, error) { return c.RemoveStream(ctx, name) })
	}
	if err != nil {
		return err
	}
	if purge {
		return printStreams(opts, out, "purged")
	}
	return printStreams(opts, out, "removed")
}

func newStreamBindCmd(opts *globalOptions) *cobra.Command {
	stream := &streamOptions{}
	cmd := &cobra.Command{
		Use:   "bind PATTERN STREAM",
		Short: "Route subjects matching PATTERN to STREAM",
		Long: `Route every subject PATTERN matches to STREAM (which must exist). Subjects
are dot-separated tokens; in a pattern '*' matches one token and a final
'>' one or more. A pattern some subject could match together with a
binding to another stream is refused (exit 3) naming that binding: a
subject always routes to exactly one stream. Quote patterns: the shell
expands '*' and treats '>' as a redirection.`,
		Example: `  ironbus stream bind 'orders.>' orders
  ironbus stream bind 'audit.*.login' audit --json
  ironbus stream bind 'orders.>' orders --data-dir ./data`,
		Args: exactArgs(2, "PATTERN STREAM"),
	}
	addStreamFlags(cmd, opts, stream, "every binding")
	cmd.RunE = classified(func() error {
		pattern, name := cmd.Flags().Arg(0), cmd.Flags().Arg(1)
		if err := validateStream(name); err != nil {
			return err
		}
		return runBindings(cmd.Context(), opts, stream, func(c *client.Client) ([]client.Binding, error) {
			return c.Bind(cmd.Context(), pattern, name)
		}, func() (streamsOutput, error) { return offlineBind(opts, stream.dataDir, pattern, name) },
			fmt.Sprintf("bound %s → %s", pattern, name))
	})
	return cmd
}

func newStreamUnbindCmd(opts *globalOptions) *cobra.Command {
	stream := &streamOptions{}
	cmd := &cobra.Command{
		Use:   "unbind PATTERN",
		Short: "Remove the binding of PATTERN",
		Long: `Remove the binding of exactly PATTERN (as it was bound). Publishing to the
subjects it matched fails with no_route afterwards, unless another binding
matches them. No such binding exits 2.`,
		Example: `  ironbus stream unbind 'orders.>'
  ironbus stream unbind 'orders.>' --data-dir ./data --json`,
		Args: exactArgs(1, "PATTERN"),
	}
	addStreamFlags(cmd, opts, stream, "the bindings left")
	cmd.RunE = classified(func() error {
		pattern := cmd.Flags().Arg(0)
		return runBindings(cmd.Context(), opts, stream, func(c *client.Client) ([]client.Binding, error) {
			return c.Unbind(cmd.Context(), pattern)
		}, func() (streamsOutput, error) { return offlineUnbind(opts, stream.dataDir, pattern) },
			"unbound "+pattern)
	})
	return cmd
}

func runBindings(ctx context.Context, opts *globalOptions, stream *streamOptions, live func(*client.Client) ([]client.Binding, error),
	offline func() (streamsOutput, error), done string) error {
	var out streamsOutput
	if stream.dataDir != "" {
		var err error
		if out, err = offline(); err != nil {
			return err
		}
	} else {
		c, err := dialBroker(ctx, opts, stream.addr, 1)
		if err != nil {
			return err
		}
		defer c.Close()
		bindings, err := live(c)
		if err != nil {
			return adminError(err, "")
		}
		out = streamsOutput{Streams: []streamRow{}, Bindings: bindingRows(bindings)}
	}
	return printStreams(opts, out, done)
}

// liveStream runs one call that answers with a stream.
func liveStream(ctx context.Context, opts *globalOptions, addr, name string, call func(*client.Client) (client.StreamState, error)) (streamsOutput, error) {
	c, err := dialBroker(ctx, opts, addr, 1)
	if err != nil {
		return streamsOutput{}, err
	}
	defer c.Close()
	state, err := call(c)
	if err != nil {
		return streamsOutput{}, adminError(err, name)
	}
	return streamsOutput{Streams: []streamRow{liveStreamRow(state)}, Bindings: bindingRows(state.Bindings)}, nil
}

func liveList(ctx context.Context, opts *globalOptions, addr string) (streamsOutput, error) {
	c, err := dialBroker(ctx, opts, addr, 1)
	if err != nil {
		return streamsOutput{}, err
	}
	defer c.Close()
	states, err := c.Streams(ctx)
	if err != nil {
		return streamsOutput{}, adminError(err, "")
	}
	bindings, err := c.Bindings(ctx)
	if err != nil {
		return streamsOutput{}, adminError(err, "")
	}
	out := streamsOutput{Streams: make([]streamRow, 0, len(states)), Bindings: bindingRows(bindings)}
	for _, s := range states {
		out.Streams = append(out.Streams, liveStreamRow(s))
	}
	return out, nil
}

func liveStreamRow(s client.StreamState) streamRow {
	row := streamRow{Name: s.Name, Partitions: len(s.Partitions), MaxBytes: s.MaxBytes, MaxAge: ageText(s.MaxAge),
		MaxRecords: s.MaxRecords, Groups: s.Groups, Offsets: make([]partitionRow, 0, len(s.Partitions))}
	row.setCompact(s.Compact, s.DeleteRetention)
	row.CompactPastGroups = s.CompactPastGroups
	row.Replicas = s.Replicas
	row.DedupWindow = dedupText(s.DedupWindow)
	if !s.Created.IsZero() {
		row.Created = s.Created.Format(time.RFC3339)
	}
	for i, p := range s.Partitions {
		row.addPartition(i, p.First, p.End, p.Bytes)
	}
	return row
}

// setCompact shows a compacted stream's delete retention (the broker's
// default when it names none).
func (row *streamRow) setCompact(compact bool, deleteRetention time.Duration) {
	if !compact {
		return
	}
	row.Compact = true
	row.DeleteRetention = ageText(deleteRetention)
	if deleteRetention == 0 {
		row.DeleteRetention = ageText(broker.DefaultDeleteRetention)
	}
}

func (row *streamRow) addPartition(index int, first, end, bytes uint64) {
	row.Offsets = append(row.Offsets, partitionRow{Partition: index, First: first, End: end, Bytes: bytes})
	row.Records += end - min(first, end)
	row.Bytes += bytes
}

func ageText(age time.Duration) string {
	if age == 0 {
		return ""
	}
	return age.String()
}

func bindingRows(bindings []client.Binding) []bindingRow {
	rows := make([]bindingRow, 0, len(bindings))
	for _, b := range bindings {
		rows = append(rows, bindingRow(b))
	}
	return rows
}

// printStreams prints the envelope with --json, else a table of the
// streams (when there are any) and of the bindings, after done.
func printStreams(opts *globalOptions, out streamsOutput, done string) error {
	out.Schema = streamsSchema
	if out.Streams == nil {
		out.Streams = []streamRow{}
	}
	if out.Bindings == nil {
		out.Bindings = []bindingRow{}
	}
	if opts.json {
		return writeJSON(opts.stdout, out)
	}
	w := opts.stdout
	if done != "" && len(out.Streams) == 1 {
		fmt.Fprintf(w, "%s %s\n", out.Streams[0].Name, done)
	} else if done != "" {
		fmt.Fprintln(w, done)
	}
	if len(out.Streams) > 0 {
		fmt.Fprintf(w, "%-24s %10s %12s %12s %7s %8s  %s\n", "STREAM", "PARTITIONS", "RECORDS", "BYTES", "GROUPS", "DEDUP", "RETENTION")
	}
	for _, s := range out.Streams {
		dedup := s.DedupWindow
		if dedup == "" {
			dedup = "-"
		}
		fmt.Fprintf(w, "%-24s %10d %12d %12s %7d %8s  %s\n", s.Name, s.Partitions, s.Records, units.FormatSize(int64(min(s.Bytes, 1<<62))), s.Groups,
			dedup, retentionText(s))
	}
	if len(out.Bindings) > 0 {
		fmt.Fprintf(w, "\n%-32s %s\n", "PATTERN", "STREAM")
	}
	for _, b := range out.Bindings {
		fmt.Fprintf(w, "%-32s %s\n", b.Pattern, b.Stream)
	}
	return nil
}

func retentionText(s streamRow) string {
	var parts []string
	if s.MaxBytes > 0 {
		parts = append(parts, units.FormatSize(int64(min(s.MaxBytes, 1<<62)))+"/partition")
	}
	if s.MaxAge != "" {
		parts = append(parts, s.MaxAge)
	}
	if s.MaxRecords > 0 {
		parts = append(parts, fmt.Sprint(s.MaxRecords, " records/partition"))
	}
	if len(parts) == 0 {
		parts = append(parts, "broker default")
	}
	switch {
	case s.Compact && s.CompactPastGroups:
		parts = append(parts, "compact past groups (tombstones "+s.DeleteRetention+")")
	case s.Compact:
		parts = append(parts, "compact (tombstones "+s.DeleteRetention+")")
	}
	return strings.Join(parts, ", ")
}
