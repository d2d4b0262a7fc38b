package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ironbus/ironbus/segment"
)

// printVerifyHuman writes verify's report for a person: one line per log,
// one indented line per problem, then a summary and what to do next.
func printVerifyHuman(w io.Writer, output verifyOutput) error {
	var text strings.Builder
	if len(output.Logs) == 0 {
		fmt.Fprintf(&text, "no logs in %s: nothing to verify\n", output.DataDir)
	}
	for _, result := range output.Logs {
		writeLogLine(&text, result)
	}
	if len(output.DeadLetterLogs) > 0 {
		text.WriteString("dead-letter queues (deadletters/):\n")
		for _, result := range output.DeadLetterLogs {
			writeLogLine(&text, result)
		}
	}
	for _, entry := range output.SpecialEntries {
		fmt.Fprintf(&text, "%s  a symbolic link or special file: the broker makes none; replace it with the file it stands for, or remove it\n", entry)
	}
	writeVerifySummary(&text, output)
	_, err := io.WriteString(w, text.String())
	return err
}

func writeLogLine(text *strings.Builder, result verifiedLog) {
	report := result.LogReport
	fmt.Fprintf(text, "%s/%d  %s  %d segments  %s  %d bytes\n", report.Stream, report.Partition,
		report.Outcome, report.Segments, offsetRange(report.FirstOffset, report.NextOffset), report.Bytes)
	for _, event := range report.Events {
		fmt.Fprintf(text, "  %s\n", describeEvent(event))
	}
	if report.KnownGaps > 0 {
		fmt.Fprintf(text, "  known gaps: %s lost earlier, already reported and quarantined\n", plural(report.KnownGaps, "offset"))
	}
	if report.Frozen != "" {
		fmt.Fprintf(text, "  frozen read-only: %s\n", report.Frozen)
	}
	if result.Error != "" {
		fmt.Fprintf(text, "  error: %s\n", result.Error)
	}
}

// offsetRange names the offsets a log holds, inclusive, the way operators
// quote them.
func offsetRange(first, next uint64) string {
	if next <= first {
		return fmt.Sprintf("no records (next offset %d)", next)
	}
	return fmt.Sprintf("offsets %d..%d", first, next-1)
}

// describeEvent puts one loss event on one line: reason, where it is on
// disk, and what it cost in offsets and records.
func describeEvent(event segment.LossEvent) string {
	var line strings.Builder
	fmt.Fprintf(&line, "%s  %s at byte %d (%d bytes): ", event.Reason.String(), event.Segment, event.ByteStart, event.Bytes)
	switch {
	case event.Reason == segment.ReasonTornTail:
		line.WriteString("written after the last sync, never acknowledged; not data loss")
	case event.Records == 0:
		line.WriteString("no records lost")
	default:
		fmt.Fprintf(&line, "offsets %d..%d lost (%s)", event.FirstOffset, event.LastOffset, plural(event.Records, "record"))
	}
	if event.MaybeUnacknowledged {
		line.WriteString(", possibly never acknowledged")
	}
	if event.Detail != "" {
		fmt.Fprintf(&line, "; %s", event.Detail)
	}
	return line.String()
}

func writeVerifySummary(text *strings.Builder, output verifyOutput) {
	var clean, tornTails, damaged, unreadable, notFound int
	var lostRecords uint64
	var lostBytes, tornBytes int64
	all := append(slices.Clone(output.Logs), output.DeadLetterLogs...)
	for _, result := range all {
		switch result.exitCode {
		case exitClean:
			clean++
		case exitDamage:
			damaged++
		case exitNotFound:
			notFound++
		default:
			unreadable++
		}
		if result.TornTailBytes > 0 {
			tornTails++
		}
		lostRecords += result.LossRecords
		lostBytes += result.LossBytes
		tornBytes += result.TornTailBytes
	}
	fmt.Fprintf(text, "verified %s in %s: %d clean, %d damaged, %d unreadable, %d not found; "+
		"%s (%d bytes) of acknowledged data lost; %d torn %s (%d bytes, never acknowledged)\n",
		plural(uint64(len(all)), "log"), output.DataDir, clean, damaged, unreadable, notFound,
		plural(lostRecords, "record"), lostBytes, tornTails, pluralWord(tornTails, "tail"), tornBytes)
	if damaged > 0 {
		fmt.Fprintf(text, "hint: run `ironbus repair --data-dir %s --apply` (broker stopped) to quarantine the "+
			"damage and make the logs writable again (add --force to also rewrite damaged checkpoints)\n", output.DataDir)
	}
	if unreadable > 0 {
		fmt.Fprintf(text, "hint: for unreadable logs, check the disk and the kernel log, and that this binary "+
			"is not older than the data (`ironbus version`)\n")
	}
}

func plural(count uint64, word string) string {
	if count == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", count, word)
}

func pluralWord(count int, word string) string {
	if count == 1 {
		return word
	}
	return word + "s"
}
