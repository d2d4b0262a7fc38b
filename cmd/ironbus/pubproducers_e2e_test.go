package main

import (
	"strings"
	"testing"
	"time"
)

// TestPubProducerFlags runs the real binary: a message id inside the
// dedup window is stored once and the second publish prints the first
// offset (flagged in --json and on stderr); a conditional append that
// does not hold exits 3 naming the actual offset; --atomic stores every
// line of stdin; --no-ack prints nothing per record and stores them.
func TestPubProducerFlags(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	addr := []string{"--addr", broker.Addr()}
	pub := func(args ...string) cliResult { return runCLI(t, append(append([]string{"pub"}, addr...), args...)...) }

	first := pub("--stream", "orders", "--key", "o-1", "--msg-id", "o-1-created", "created")
	again := pub("--stream", "orders", "--key", "o-1", "--msg-id", "o-1-created", "created again", "--json")
	expectCode(t, first, exitClean)
	expectCode(t, again, exitClean)
	if strings.TrimSpace(first.stdout) != "0" || !strings.Contains(again.stdout, `"offset":0,"duplicate":true`) || !strings.Contains(again.stderr, "duplicate") {
		t.Fatalf("message id: first %q, again %q / %q", first.stdout, again.stdout, again.stderr)
	}
	expectCode(t, pub("--stream", "orders", "--msg-id", "x"), exitUsage) // an id names one record: no stdin

	ledger := []string{"--stream", "ledger", "--partition", "0"}
	expectCode(t, pub(append(ledger, "--expect-last-offset", "none", "a")...), exitClean)
	refused := pub(append(ledger, "--expect-last-offset", "none", "b")...)
	expectCode(t, refused, exitRefused)
	if !strings.Contains(refused.stderr, "the last offset is 0") {
		t.Fatalf("the refusal must name the actual offset: %q", refused.stderr)
	}
	expectCode(t, pub(append(ledger, "--expect-last-offset", "0", "c")...), exitClean)
	expectCode(t, pub("--stream", "ledger", "--expect-last-offset", "1", "d"), exitUsage) // no partition named
	subjectRefused := pub(append(ledger, "--subject", "acct.1", "--expect-last-subject-offset", "7", "e")...)
	expectCode(t, subjectRefused, exitRefused)
	if !strings.Contains(subjectRefused.stderr, "no record yet") {
		t.Fatalf("the refusal must say there is no record of the subject: %q", subjectRefused.stderr)
	}

	batch := runCLIInput(t, "one\ntwo\nthree\n", append(append([]string{"pub"}, addr...), append(ledger, "--atomic")...)...)
	expectCode(t, batch, exitClean)
	if got := strings.Fields(batch.stdout); strings.Join(got, " ") != "2 3 4" {
		t.Fatalf("the atomic batch printed %q, want offsets 2 3 4", batch.stdout)
	}
	silent := runCLIInput(t, "1\n2\n3\n", append(append([]string{"pub"}, addr...), "--stream", "metrics", "--no-ack")...)
	expectCode(t, silent, exitClean)
	if silent.stdout != "" || !strings.Contains(silent.stderr, "sent 3 records") {
		t.Fatalf("--no-ack printed %q / %q", silent.stdout, silent.stderr)
	}
	// No answer means no wait for the sync either: the records become
	// durable shortly after pub exits.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info := streamsOf(t, runCLI(t, append([]string{"stream", "info", "metrics", "--json"}, addr...)...))
		records := info.Streams[0].Records
		if records == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the no-ack records: %d stored, want 3", records)
		}
	}
	expectCode(t, pub("--stream", "metrics", "--no-ack", "--atomic"), exitUsage)
}
