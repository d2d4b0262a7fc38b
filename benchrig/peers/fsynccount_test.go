package main

import (
	"strings"
	"testing"
)

// A summary as strace 6 writes it for `-c -e trace=fsync,fdatasync`,
// with an errors column on one row.
const straceSummary = `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 73.86    0.000130          43      1184           fsync
 26.14    0.000046          23      3315         2 fdatasync
------ ----------- ----------- --------- --------- ----------------
100.00    0.000176          35      4499         2 total
`

func TestParseStraceCounts(t *testing.T) {
	fsync, fdatasync, err := parseStraceCounts(strings.NewReader(straceSummary))
	if err != nil || fsync != 1184 || fdatasync != 3315 {
		t.Fatalf("got fsync %d, fdatasync %d, err %v; want 1184, 3315, nil", fsync, fdatasync, err)
	}
}

func TestParseStraceCountsWithoutCalls(t *testing.T) {
	// strace writes only the header and the total when nothing was called.
	empty := "% time     seconds  usecs/call     calls    errors syscall\n" +
		"------ ----------- ----------- --------- --------- ----------------\n" +
		"100.00    0.000000           0         0           total\n"
	fsync, fdatasync, err := parseStraceCounts(strings.NewReader(empty))
	if err != nil || fsync != 0 || fdatasync != 0 {
		t.Fatalf("got %d, %d, %v; want 0, 0, nil", fsync, fdatasync, err)
	}
}

func TestParseStraceCountsSkipsNegativeCounts(t *testing.T) {
	fsync, _, err := parseStraceCounts(strings.NewReader(" 1.00 0.1 1 -5 fsync\n"))
	if err != nil || fsync != 0 {
		t.Fatalf("got %d, %v; want 0, nil", fsync, err)
	}
}

// FuzzParseStraceCounts: any text parses without panicking, and a count is
// never negative.
func FuzzParseStraceCounts(f *testing.F) {
	f.Add(straceSummary)
	f.Add("")
	f.Add("a b c 9999999999999999999999 fsync\n")
	f.Fuzz(func(t *testing.T, summary string) {
		fsync, fdatasync, err := parseStraceCounts(strings.NewReader(summary))
		if err == nil && (fsync < 0 || fdatasync < 0) {
			t.Fatalf("negative count: fsync %d, fdatasync %d", fsync, fdatasync)
		}
	})
}

func TestConclude(t *testing.T) {
	cases := []struct {
		check labelCheck
		want  string
	}{
		{labelCheck{Messages: 0}, "no messages: shows nothing"},
		{labelCheck{Messages: 1000}, "no sync at all: acks come from the page cache"},
		{labelCheck{Messages: 1000, Fsync: 1000, PerMessage: 1}, "one sync per message (no batching)"},
		{labelCheck{Messages: 1000, Fdatasync: 10, PerMessage: 0.01}, "one sync per 100 messages (group commit)"},
	}
	for _, c := range cases {
		if got := conclude(c.check); got != c.want {
			t.Errorf("conclude(%+v) = %q, want %q", c.check, got, c.want)
		}
	}
}
