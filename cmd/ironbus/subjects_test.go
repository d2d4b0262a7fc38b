package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/client"
)

// TestPubSubSubjectsAndPartitions drives the streams flags of pub and sub
// against a real broker: pub --subject routes by the bindings (no_route
// without one), pub --partition pins, sub reads every partition by
// default, --subject filters one stream or spans several, and the JSON
// lines name stream, partition and offset.
func TestPubSubSubjectsAndPartitions(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	addr := []string{"--addr", broker.Addr()}
	ctx := context.Background()
	c, err := client.Dial(ctx, broker.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, stream := range []struct {
		name       string
		partitions uint32
	}{{"orders", 3}, {"invoices", 1}} {
		if _, err := c.CreateStream(ctx, stream.name, client.StreamSettings{Partitions: stream.partitions}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Bind(ctx, stream.name+".>", stream.name); err != nil {
			t.Fatal(err)
		}
	}

	published := func(args ...string) map[string]any {
		t.Helper()
		result := runCLI(t, append(append([]string{"pub", "--json"}, addr...), args...)...)
		expectCode(t, result, exitClean)
		var line map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(result.stdout)), &line); err != nil {
			t.Fatalf("pub --json printed %q: %v", result.stdout, err)
		}
		return line
	}
	if line := published("--subject", "orders.eu.created", "--key", "c-1", "eu-1"); line["stream"] != "orders" {
		t.Fatalf("routed publish: %v", line)
	}
	published("--subject", "orders.us.created", "--key", "c-2", "us-1")
	if line := published("--stream", "orders", "--partition", "2", "--subject", "orders.eu.paid", "eu-2"); line["partition"] != 2.0 {
		t.Fatalf("pinned publish: %v", line)
	}
	published("--subject", "invoices.eu", "inv-eu")
	published("--subject", "invoices.us", "inv-us")
	expectCode(t, runCLI(t, append(append([]string{"pub"}, addr...), "--subject", "refunds.eu", "x")...), exitDamage)
	expectCode(t, runCLI(t, append(append([]string{"pub"}, addr...), "--subject", "orders..eu", "x")...), exitUsage)
	expectCode(t, runCLI(t, append(append([]string{"pub"}, addr...), "--subject", "orders.eu", "--partition", "1", "x")...), exitUsage)

	at := append([]string{"--wait", "300ms", "--max", "0"}, addr...)
	if got := subLines(t, append(at, "--stream", "orders", "--group", "all")...); len(got) != 3 {
		t.Fatalf("sub of every partition printed %q", got)
	}
	if got := subLines(t, append(at, "--stream", "orders", "--partition", "2", "--group", "p2")...); len(got) != 1 || !strings.Contains(got[0], "payload=eu-2") {
		t.Fatalf("sub --partition 2 printed %q", got)
	}
	filtered := subLines(t, append(at, "--stream", "orders", "--subject", "orders.eu.*", "--group", "eu")...)
	if records := withoutGaps(filtered); len(records) != 2 {
		t.Fatalf("sub --subject on one stream printed %q", filtered)
	}
	spanning := subLines(t, append(at, "--subject", "*.eu.>", "--group", "eu-all")...)
	spanning = append(spanning, subLines(t, append(at, "--subject", "invoices.eu", "--group", "inv")...)...)
	records := withoutGaps(spanning)
	if len(records) != 3 || !strings.Contains(strings.Join(records, "\n"), "stream=invoices") {
		t.Fatalf("spanning sub printed %q", spanning)
	}
	missing := runCLI(t, append([]string{"sub", "--subject", "nothing.*", "--group", "x"}, addr...)...)
	expectCode(t, missing, exitNotFound)

	lines := runCLI(t, append([]string{"sub", "--json", "--stream", "orders", "--group", "js", "--wait", "300ms"}, addr...)...)
	expectCode(t, lines, exitClean)
	for line := range strings.Lines(strings.TrimSpace(lines.stdout)) {
		var delivery map[string]any
		if err := json.Unmarshal([]byte(line), &delivery); err != nil || delivery["stream"] != "orders" || delivery["partition"] == nil || delivery["offset"] == nil {
			t.Fatalf("sub --json line %q: %v", line, err)
		}
	}
}

// withoutGaps drops sub's gap lines.
func withoutGaps(lines []string) []string {
	var kept []string
	for _, line := range lines {
		if !strings.Contains(line, "gap ") {
			kept = append(kept, line)
		}
	}
	return kept
}
