package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

const (
	docsBeginMarker = "<!-- peers:begin"
	docsEndMarker   = "<!-- peers:end -->"
)

// renderDocs regenerates the block between the peers markers of docsPath
// from the JSON at jsonPath, and nothing else: other sections of the file
// are edited by others, so the file is read fresh, only the block is
// replaced, and the result is written back in one rename.
func renderDocs(jsonPath, docsPath string) error {
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("%s: %w", jsonPath, err)
	}
	document, err := os.ReadFile(docsPath)
	if err != nil {
		return err
	}
	updated, err := replaceBlock(document, markdown(rep))
	if err != nil {
		return fmt.Errorf("%s: %w", docsPath, err)
	}
	temporary := filepath.Join(filepath.Dir(docsPath), "."+filepath.Base(docsPath)+".peers")
	if err := os.WriteFile(temporary, updated, 0o644); err != nil {
		return err
	}
	return os.Rename(temporary, docsPath)
}

// replaceBlock swaps what lies between the begin marker's line and the end
// marker for block.
func replaceBlock(document []byte, block string) ([]byte, error) {
	begin := bytes.Index(document, []byte(docsBeginMarker))
	if begin < 0 {
		return nil, fmt.Errorf("no %q marker", docsBeginMarker)
	}
	afterBeginLine := bytes.IndexByte(document[begin:], '\n')
	if afterBeginLine < 0 {
		return nil, fmt.Errorf("nothing after the %q marker", docsBeginMarker)
	}
	contentStart := begin + afterBeginLine + 1
	end := bytes.Index(document[contentStart:], []byte(docsEndMarker))
	if end < 0 {
		return nil, fmt.Errorf("no %q marker after the begin marker", docsEndMarker)
	}
	var out bytes.Buffer
	out.Write(document[:contentStart])
	out.WriteString(block)
	out.Write(document[contentStart+end:])
	return out.Bytes(), nil
}

// markdown renders the report as the published block.
func markdown(rep report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s.\n\n```sh\n%s\n```\n\n", rep.Date, rep.Machine, rep.Command)
	fmt.Fprintf(&b, "Medians of %d runs (min–max in brackets); ratio = IronBus / peer, for µs rows lower is better. "+
		"Durability labels: `ironbus-sync`, `jetstream-always`, `raw-disk` and `tcp-floor` (a one-goroutine TCP server that "+
		"fdatasyncs each message before answering: no broker) fsync before the ack; `jetstream-default` "+
		"acks from the page cache (not power-loss safe); `nats-core` stores nothing. A ratio across labels appears only "+
		"where the row says so.\n\n", rep.Runs)
	b.WriteString("| row | what | payload | IronBus | peer | ratio | target |\n|---|---|---:|---:|---:|---:|---|\n")
	var notes []string
	for _, row := range rep.Rows {
		fmt.Fprintf(&b, "| %s | %s | %d B | %s `%s` [%s] | %s `%s` [%s] | **%.2f×** | %s |\n", row.Row, row.Title, row.PayloadBytes,
			formatValue(row.IronBus, row.Unit), row.IronBusLabel, spread(row.MinMax["ironbus"], row.Unit),
			formatValue(row.Peer, row.Unit), row.PeerLabel, spread(row.MinMax["peer"], row.Unit), row.Ratio, verdict(row))
		if row.Note != "" && !slices.Contains(notes, row.Note) {
			notes = append(notes, row.Note)
		}
	}
	b.WriteString("\nLabels checked in the same run (fsync and fdatasync calls of the whole process, counted with `strace -f -c` " +
		"while one side served a short run alone; strace slows everything, so only the ratio means anything):\n\n")
	b.WriteString("| side | workload | messages | fsync | fdatasync | syncs per message | shows |\n|---|---|---:|---:|---:|---:|---|\n")
	for _, check := range rep.LabelChecks {
		fmt.Fprintf(&b, "| `%s` | %s | %d | %d | %d | %.3f | %s |\n", check.Side, check.Workload, check.Messages,
			check.Fsync, check.Fdatasync, check.PerMessage, check.Conclusion)
	}
	b.WriteString("\n")
	for _, line := range slices.Concat(rep.Peers, rep.Notes, notes) {
		fmt.Fprintf(&b, "* %s\n", line)
	}
	return b.String()
}

func spread(minMax [2]float64, unit string) string {
	trim := func(value float64) string { return strings.TrimSuffix(formatValue(value, unit), " "+unit) }
	return trim(minMax[0]) + "–" + trim(minMax[1])
}
