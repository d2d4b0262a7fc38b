package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// labelCheck is one verification of a durability label: how many fsync
// and fdatasync calls the whole process made while one side served a
// short run. Every server is embedded in this process and runs alone, so
// the process's count is that side's count.
type labelCheck struct {
	Side       string  `json:"side"`
	Workload   string  `json:"workload"`
	Messages   uint64  `json:"messages"`
	Fsync      int     `json:"fsync"`
	Fdatasync  int     `json:"fdatasync"`
	PerMessage float64 `json:"syncs_per_message"`
	Conclusion string  `json:"conclusion"`
}

// errNoStrace means the checks were skipped, not failed.
var errNoStrace = errors.New("strace not found: labels not verified (apt-get install -y strace)")

// countSyncs runs workload while strace counts this process's fsync and
// fdatasync calls. strace stops every thread at every system call, so the
// workload runs far slower than in the measured rows: only the ratio of
// syncs to messages means anything here.
func countSyncs(workload func() (uint64, error)) (messages uint64, fsync, fdatasync int, err error) {
	stracePath, err := exec.LookPath("strace")
	if err != nil {
		return 0, 0, 0, errNoStrace
	}
	output := filepath.Join(os.TempDir(), fmt.Sprintf("peers-strace-%d-%d.txt", os.Getpid(), time.Now().UnixNano()))
	defer os.Remove(output)
	tracer := exec.Command(stracePath, "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", output, "-p", strconv.Itoa(os.Getpid()))
	if err := tracer.Start(); err != nil {
		return 0, 0, 0, err
	}
	if err := waitTraced(5 * time.Second); err != nil {
		_ = tracer.Process.Kill()
		_ = tracer.Wait()
		return 0, 0, 0, err
	}
	messages, workErr := workload()
	// On SIGINT strace detaches from every thread and writes its summary.
	_ = tracer.Process.Signal(os.Interrupt)
	_ = tracer.Wait()
	if workErr != nil {
		return 0, 0, 0, workErr
	}
	fsync, fdatasync, err = parseStraceSummary(output)
	return messages, fsync, fdatasync, err
}

// waitTraced waits until a tracer is attached to this process, then a
// little longer, since strace -f attaches to the threads one by one.
func waitTraced(limit time.Duration) error {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(status)) {
			if rest, found := strings.CutPrefix(line, "TracerPid:"); found && strings.TrimSpace(rest) != "0" {
				time.Sleep(300 * time.Millisecond)
				return nil
			}
		}
	}
	return errors.New("strace did not attach (ptrace may be forbidden here)")
}

// parseStraceSummary reads the calls column of `strace -c` output in the
// file at path.
func parseStraceSummary(path string) (fsync, fdatasync int, err error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer file.Close()
	return parseStraceCounts(file)
}

// parseStraceCounts reads the calls column of `strace -c` output:
// "% time  seconds  usecs/call  calls  [errors]  syscall". Lines that are
// not such a row (headers, rules, the total) are skipped; a count that is
// not a non-negative integer is not a row either.
func parseStraceCounts(summary io.Reader) (fsync, fdatasync int, err error) {
	scanner := bufio.NewScanner(summary)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 5 {
			continue
		}
		calls, err := strconv.Atoi(fields[3])
		if err != nil || calls < 0 {
			continue
		}
		switch fields[len(fields)-1] {
		case "fsync":
			fsync = calls
		case "fdatasync":
			fdatasync = calls
		}
	}
	return fsync, fdatasync, scanner.Err()
}

// conclude says what the counts show, in the words of the labels. A count
// cannot show that a sync came before its ack; that ordering is the
// broker's code (docs/DURABILITY.md) and JetStream's `always` setting.
func conclude(check labelCheck) string {
	syncs := float64(check.Fsync + check.Fdatasync)
	switch {
	case check.Messages == 0:
		return "no messages: shows nothing"
	case syncs == 0:
		return "no sync at all: acks come from the page cache"
	case check.PerMessage >= 0.9:
		return "one sync per message (no batching)"
	default:
		return fmt.Sprintf("one sync per %.0f messages (group commit)", float64(check.Messages)/syncs)
	}
}
