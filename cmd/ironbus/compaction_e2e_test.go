package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

// TestCompactionEndToEnd runs the real binary: a compacted stream is
// created, keys are published (a tombstone among them), stream compact
// keeps the latest record of each key, and both a work group (Deliver)
// and a streaming group (DeliverBatch) read the kept records at their
// original offsets, the tombstone flagged, with compacted gaps between.
func TestCompactionEndToEnd(t *testing.T) {
	base := t.TempDir()
	dataDir := filepath.Join(base, "data")
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	addr := []string{"--addr", broker.Addr()}
	created := streamsOf(t, runCLI(t, append([]string{"stream", "create", "latest", "--compact", "--delete-retention", "1h", "--json"}, addr...)...))
	if s := created.Streams[0]; !s.Compact || s.DeleteRetention != "1h0m0s" {
		t.Fatalf("created %+v", s)
	}
	expectCode(t, runCLI(t, append([]string{"stream", "create", "plain", "--delete-retention", "1h"}, addr...)...), exitUsage)
	expectCode(t, runCLI(t, append([]string{"stream", "create", "plain", "--compact-past-groups"}, addr...)...), exitUsage)
	past := streamsOf(t, runCLI(t, append([]string{"stream", "create", "unpinned", "--compact", "--compact-past-groups", "--json"}, addr...)...))
	if s := past.Streams[0]; !s.Compact || !s.CompactPastGroups || s.DeleteRetention != "24h0m0s" {
		t.Fatalf("created %+v", s)
	}
	pub := append([]string{"pub", "--stream", "latest"}, addr...)
	expectCode(t, runCLIInput(t, "a1\na2\na3\n", append(pub, "--key", "a")...), exitClean) // offsets 0-2
	expectCode(t, runCLIInput(t, "b1\nb2\n", append(pub, "--key", "b")...), exitClean)     // 3-4
	expectCode(t, runCLI(t, append(pub, "--key", "c", "c1")...), exitClean)                // 5
	tombstone := runCLI(t, append(pub, "--key", "b", "--tombstone")...)                    // 6
	expectCode(t, tombstone, exitClean)
	if strings.TrimSpace(tombstone.stdout) != "6" {
		t.Fatalf("the tombstone was stored at %q, want 6", tombstone.stdout)
	}
	for _, refused := range []cliResult{
		runCLI(t, append(pub, "--tombstone")...),
		runCLI(t, append(pub, "--key", "b", "--tombstone", "payload")...),
		runCLIInput(t, "data\n", append(pub, "--key", "b", "--tombstone")...),
	} {
		expectCode(t, refused, exitUsage)
		if !strings.Contains(refused.stderr, "--tombstone") {
			t.Fatalf("refusal does not name --tombstone: %q", refused.stderr)
		}
	}

	result := runCLI(t, append([]string{"stream", "compact", "latest", "--json"}, addr...)...)
	expectCode(t, result, exitClean)
	var compacted compactedOutput
	if err := json.Unmarshal([]byte(result.stdout), &compacted); err != nil || compacted.Schema != compactedSchema {
		t.Fatalf("not a %s object: %q %v", compactedSchema, result.stdout, err)
	}
	if compacted.RecordsRemoved != 4 || compacted.RecordsKept != 3 || compacted.BytesAfter >= compacted.BytesBefore {
		t.Fatalf("compaction: %+v", compacted)
	}
	human := runCLI(t, append([]string{"stream", "compact", "latest"}, addr...)...)
	if expectCode(t, human, exitClean); !strings.Contains(human.stdout, "latest compacted: 3 records kept, 0 removed") {
		t.Fatalf("a second compaction printed %q", human.stdout)
	}
	info := streamsOf(t, runCLI(t, append([]string{"stream", "info", "latest", "--json"}, addr...)...))
	if s := info.Streams[0]; !s.Compact || s.DeleteRetention != "1h0m0s" {
		t.Fatalf("info %+v", s)
	}
	expectCode(t, runCLI(t, append([]string{"stream", "compact", "nothing"}, addr...)...), exitNotFound)
	expectCode(t, runCLI(t, append([]string{"pub", "--stream", "plain", "x"}, addr...)...), exitClean)
	expectCode(t, runCLI(t, append([]string{"stream", "compact", "plain"}, addr...)...), exitDamage)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, broker.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fetched, err := c.Fetch(ctx, "latest", "work", client.FetchOptions{MaxRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	checkCompactedRead(t, "work group", fetched.Messages, fetched.Gaps)
	stream, err := c.Stream("latest", "streaming", client.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var messages []client.Message
	var gaps []client.Gap
	for len(messages) < 3 {
		batch, err := stream.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range batch.Messages { // the batch's buffers are reused by the next call
			m.Key, m.Payload = []byte(string(m.Key)), []byte(string(m.Payload))
			messages = append(messages, m)
		}
		gaps = append(gaps, batch.Gaps...)
	}
	checkCompactedRead(t, "streaming group", messages, gaps)

	// Backup, verify, scrub, restore and recovery all read the sparse
	// offsets of the compacted segments as intended gaps.
	out := filepath.Join(base, "backup")
	expectCode(t, runCLI(t, "backup", "--data-dir", dataDir, "--out", out), exitClean)
	c.Close()
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("the broker exited %d", code)
	}
	expectCode(t, runCLI(t, "verify", "--data-dir", dataDir), exitClean)
	restored := filepath.Join(base, "restored")
	expectCode(t, runCLI(t, "restore", "--from", out, "--data-dir", restored), exitClean)
	expectCode(t, runCLI(t, "verify", "--data-dir", restored), exitClean)
	expectCode(t, runCLI(t, "scrub", "--data-dir", restored), exitClean)
	broker = ironbus.Serve(t, "serve", "--data-dir", restored, "--addr", "127.0.0.1:0")
	again, err := client.Dial(ctx, broker.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if fetched, err = again.Fetch(ctx, "latest", "after-restore", client.FetchOptions{MaxRecords: 10}); err != nil {
		t.Fatal(err)
	}
	checkCompactedRead(t, "restored", fetched.Messages, fetched.Gaps)
}

func checkCompactedRead(t *testing.T, label string, messages []client.Message, gaps []client.Gap) {
	t.Helper()
	want := []struct {
		offset    uint64
		key       string
		payload   string
		tombstone bool
	}{{2, "a", "a3", false}, {5, "c", "c1", false}, {6, "b", "", true}}
	if len(messages) != len(want) {
		t.Fatalf("%s: %d messages, want %d", label, len(messages), len(want))
	}
	for i, w := range want {
		m := messages[i]
		if m.Offset != w.offset || string(m.Key) != w.key || string(m.Payload) != w.payload || m.Tombstone != w.tombstone {
			t.Fatalf("%s: message %d is offset %d key %q payload %q tombstone %v; want %+v", label, i, m.Offset, m.Key, m.Payload, m.Tombstone, w)
		}
	}
	covered := uint64(0)
	for _, g := range gaps {
		if g.Reason != client.GapCompacted {
			t.Fatalf("%s: gap %+v", label, g)
		}
		covered += g.To - g.From
	}
	if covered != 4 {
		t.Fatalf("%s: gaps cover %d offsets, want the 4 compacted ones: %+v", label, covered, gaps)
	}
}
