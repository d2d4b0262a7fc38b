package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/internal/units"
)

// ironbus stream compact: a compaction now, through the running broker.

// compactedSchema names the --json output of stream compact.
const compactedSchema = "ironbus.cli.compacted.v1"

type compactedOutput struct {
	Schema            string            `json:"schema"`
	Stream            string            `json:"stream"`
	RecordsKept       uint64            `json:"records_kept"`
	RecordsRemoved    uint64            `json:"records_removed"`
	TombstonesRemoved uint64            `json:"tombstones_removed"`
	BytesBefore       uint64            `json:"bytes_before"`
	BytesAfter        uint64            `json:"bytes_after"`
	Partitions        []compactedDetail `json:"partitions"`
}

type compactedDetail struct {
	Partition         int    `json:"partition"`
	RecordsKept       uint64 `json:"records_kept"`
	RecordsRemoved    uint64 `json:"records_removed"`
	TombstonesRemoved uint64 `json:"tombstones_removed"`
	BytesBefore       uint64 `json:"bytes_before"`
	BytesAfter        uint64 `json:"bytes_after"`
	Segments          int    `json:"segments_rewritten"`
	Passes            int    `json:"passes"`
}

func newStreamCompactCmd(opts *globalOptions) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "compact NAME",
		Short: "Seal and compact a compacted stream now",
		Long: `Seal the active segment of each partition of a stream created with --compact
and compact its sealed segments now: keep the latest record of each key (and
each tombstone until its delete retention passed), drop the records a later
record of their key superseded. Offsets never change; consumers see the
removed ones as compacted gaps. Records a consumer group has not committed
are kept (unless the stream was created with --compact-past-groups). The
broker also compacts in the background; see docs/PRODUCERS.md (Key compaction).

Prints the records kept and removed and the bytes of the sealed segments
before and after. A stream that is not compacted exits 3.`,
		Example: `  ironbus stream compact latest
  ironbus stream compact latest --json`,
		Args: exactArgs(1, "NAME"),
	}
	addAddrFlag(cmd, &addr)
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+compactedSchema+")")
	cmd.RunE = classified(func() error {
		name := cmd.Flags().Arg(0)
		if err := validateStream(name); err != nil {
			return err
		}
		c, err := dialBroker(cmd.Context(), opts, addr, 1)
		if err != nil {
			return err
		}
		defer c.Close()
		if !opts.json {
			fmt.Fprintf(opts.stderr, "compacting %s: sealing the active segments and rewriting the sealed ones...\n", name)
		}
		parts, err := c.CompactStream(cmd.Context(), name)
		if err != nil {
			return adminError(err, name)
		}
		return printCompacted(opts, compactedRows(name, parts))
	})
	return cmd
}

func compactedRows(name string, parts []client.CompactedPartition) compactedOutput {
	out := compactedOutput{Schema: compactedSchema, Stream: name, Partitions: make([]compactedDetail, 0, len(parts))}
	for p, part := range parts {
		out.Partitions = append(out.Partitions, compactedDetail{Partition: p, RecordsKept: part.RecordsKept,
			RecordsRemoved: part.RecordsRemoved, TombstonesRemoved: part.TombstonesRemoved, BytesBefore: part.BytesBefore,
			BytesAfter: part.BytesAfter, Segments: part.Segments, Passes: part.Passes})
		out.RecordsKept += part.RecordsKept
		out.RecordsRemoved += part.RecordsRemoved
		out.TombstonesRemoved += part.TombstonesRemoved
		out.BytesBefore += part.BytesBefore
		out.BytesAfter += part.BytesAfter
	}
	return out
}

func printCompacted(opts *globalOptions, out compactedOutput) error {
	if opts.json {
		return writeJSON(opts.stdout, out)
	}
	size := func(n uint64) string { return units.FormatSize(int64(min(n, 1<<62))) }
	w := opts.stdout
	fmt.Fprintf(w, "%s compacted: %d records kept, %d removed (%d tombstones); sealed segments %s -> %s\n", out.Stream,
		out.RecordsKept, out.RecordsRemoved, out.TombstonesRemoved, size(out.BytesBefore), size(out.BytesAfter))
	fmt.Fprintf(w, "%-10s %12s %12s %11s %10s %10s %9s\n", "PARTITION", "KEPT", "REMOVED", "TOMBSTONES", "BEFORE", "AFTER", "SEGMENTS")
	for _, p := range out.Partitions {
		fmt.Fprintf(w, "%-10d %12d %12d %11d %10s %10s %9d\n", p.Partition, p.RecordsKept, p.RecordsRemoved,
			p.TombstonesRemoved, size(p.BytesBefore), size(p.BytesAfter), p.Segments)
	}
	return nil
}
