package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
)

func TestPeekFirstRecords(t *testing.T) {
	t.Parallel()
	result := runCLI(t, "peek", "--data-dir", copyTestdata(t, "demo"), "--from", "0", "--limit", "3")
	expectCode(t, result, exitClean)
	lines := strings.Split(strings.TrimRight(result.stdout, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), result.stdout)
	}
	for offset, line := range lines {
		if !strings.HasPrefix(line, fmt.Sprintf("#%d ", offset)) || !strings.Contains(line, " payload=") {
			t.Errorf("line %d: %q", offset, line)
		}
	}
}

func TestPeekPastTheEnd(t *testing.T) {
	t.Parallel()
	result := runCLI(t, "peek", "--data-dir", copyTestdata(t, "demo"), "--from", "1000000")
	expectCode(t, result, exitClean)
	if !strings.Contains(result.stdout, "no records at or after offset 1000000") {
		t.Errorf("peek past the end says %q", result.stdout)
	}
}

func TestPeekMissingLog(t *testing.T) {
	t.Parallel()
	result := runCLI(t, "peek", "--data-dir", copyTestdata(t, "demo"), "--stream", "absent")
	expectCode(t, result, exitNotFound)
	if !strings.Contains(result.stderr, "ironbus verify --data-dir") {
		t.Errorf("stderr does not say how to list the logs: %q", result.stderr)
	}
}

// dumpLine holds the fields of either kind of dump line.
type dumpLine struct {
	Offset          *uint64 `json:"offset"`
	Timestamp       string  `json:"timestamp"`
	Payload         string  `json:"payload"`
	PayloadEncoding string  `json:"payload_encoding"`
	Gap             *struct {
		From   uint64 `json:"from"`
		To     uint64 `json:"to"`
		Reason string `json:"reason"`
	} `json:"gap"`
}

func parseDump(t *testing.T, stdout string) []dumpLine {
	t.Helper()
	var lines []dumpLine
	for number, text := range strings.Split(strings.TrimRight(stdout, "\n"), "\n") {
		var line dumpLine
		if err := json.Unmarshal([]byte(text), &line); err != nil {
			t.Fatalf("line %d is not JSON: %s: %q", number+1, err.Error(), text)
		}
		lines = append(lines, line)
	}
	return lines
}

func TestDumpPrintsEveryRecord(t *testing.T) {
	t.Parallel()
	dataDir := copyTestdata(t, "demo")
	_, committed := engineReport(t, dataDir) // 601 records in the demo: offsets 0..600
	result := runCLI(t, "dump", "--data-dir", dataDir)
	expectCode(t, result, exitClean)
	lines := parseDump(t, result.stdout)
	if uint64(len(lines)) != committed {
		t.Fatalf("%d lines, want %d", len(lines), committed)
	}
	for index, line := range lines {
		if line.Offset == nil || *line.Offset != uint64(index) || line.Timestamp == "" {
			t.Fatalf("line %d: %+v", index+1, line)
		}
		if line.PayloadEncoding != encodingText && line.PayloadEncoding != encodingBase64 {
			t.Fatalf("line %d: payload encoding %q", index+1, line.PayloadEncoding)
		}
	}
}

func TestDumpShowsTheDamageAsAGap(t *testing.T) {
	t.Parallel()
	dataDir := copyTestdata(t, "damaged")
	report, _ := engineReport(t, dataDir)
	var lost segment.LossEvent
	for _, event := range report.Events {
		if event.DataLoss {
			lost = event
		}
	}
	if lost.Records == 0 {
		t.Fatalf("no data loss in the damaged test data: %+v", report)
	}
	from := fmt.Sprint(lost.FirstOffset - 1)
	result := runCLI(t, "dump", "--json", "--data-dir", dataDir, "--from", from, "--limit", "2")
	expectCode(t, result, exitClean)
	lines := parseDump(t, result.stdout)
	if len(lines) != 3 || lines[1].Gap == nil {
		t.Fatalf("want record, gap, record:\n%s", result.stdout)
	}
	gap := lines[1].Gap
	if gap.From != lost.FirstOffset || gap.To != lost.LastOffset+1 || gap.Reason != lost.Reason.String() {
		t.Errorf("gap %+v, want %d..%d (%s)", *gap, lost.FirstOffset, lost.LastOffset+1, lost.Reason.String())
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	result := runCLI(t, "version", "--json")
	expectCode(t, result, exitClean)
	var output versionOutput
	if err := json.Unmarshal([]byte(result.stdout), &output); err != nil {
		t.Fatalf("not JSON: %s: %q", err.Error(), result.stdout)
	}
	want := formatVersions{DataDir: segment.EncryptedDataFormatVersion, Segment: format.SegmentFormatVersion,
		Frame: format.FrameVersion, Body: record.BodyVersion}
	if output.Schema != versionSchema || output.Version == "" || output.Formats != want {
		t.Errorf("version output %+v, want formats %+v", output, want)
	}
	human := runCLI(t, "version")
	expectCode(t, human, exitClean)
	if !strings.HasPrefix(human.stdout, "ironbus ") || !strings.Contains(human.stdout, "formats: data dir") {
		t.Errorf("version says %q", human.stdout)
	}
}
