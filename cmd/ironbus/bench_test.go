package main

import (
	"encoding/json"
	"runtime"
	"testing"

	"github.com/ironbus/ironbus/benchrig/load"
)

func runBenchJSON(t *testing.T, args ...string) load.Result {
	t.Helper()
	result := runCLI(t, append([]string{"bench", "--json"}, args...)...)
	expectCode(t, result, exitClean)
	var out load.Result
	if err := json.Unmarshal([]byte(result.stdout), &out); err != nil {
		t.Fatalf("bench --json printed %q: %v", result.stdout, err)
	}
	if out.Schema != load.Schema {
		t.Fatalf("schema %q", out.Schema)
	}
	return out
}

// TestBenchModes runs each mode briefly against the broker bench starts
// and checks the figures hang together.
func TestBenchModes(t *testing.T) {
	if ironbus.Emulator() != "" {
		t.Skip("bench starts its broker by re-executing itself, which needs binfmt_misc under emulation")
	}
	publish := runBenchJSON(t, "--count", "3000", "--producers", "2", "--pubwindow", "64")
	if publish.Records != 3000 || publish.MsgsPerSec <= 0 || publish.AckP50 <= 0 || publish.AckP99 < publish.AckP50 {
		t.Fatalf("publish: %+v", publish)
	}
	if runtime.GOOS == "linux" {
		if publish.Fsyncs == 0 || publish.RecordsPerFsync <= 0 || publish.RSSBytes <= 0 || publish.DiskPerPayload <= 0 {
			t.Fatalf("publish: the broker's figures are missing: %+v", publish)
		}
	}
	roundTrip := runBenchJSON(t, "--mode", "round-trip", "--count", "2000", "--rate", "4000")
	if roundTrip.ConsumedRecords < 2000 || roundTrip.E2EP50 <= 0 {
		t.Fatalf("round-trip: %+v", roundTrip)
	}
	streaming := runBenchJSON(t, "--mode", "subscribe", "--count", "5000", "--consume-tier", "streaming", "--consumers", "2")
	if streaming.ConsumedRecords != 10000 || streaming.ConsumePerSec <= 0 {
		t.Fatalf("subscribe, streaming, 2 readers of 5,000: %+v", streaming)
	}
	work := runBenchJSON(t, "--mode", "subscribe", "--count", "5000", "--consumers", "2")
	if work.ConsumedRecords != 5000 {
		t.Fatalf("subscribe, work group of 2 sharing 5,000: %+v", work)
	}
	lingered := runBenchJSON(t, "--duration", "1s", "--producers", "4", "--pubwindow", "1", "--commit-linger", "2ms", "--floor")
	if lingered.CommitLinger != "2ms" || lingered.Records == 0 || lingered.FloorTCPPerSec <= 0 || lingered.FloorRawPerSec <= 0 ||
		lingered.FloorTCPP50 <= 0 || lingered.RatioToTCPFloor <= 0 || lingered.RatioToRawDisk <= 0 {
		t.Fatalf("publish with a commit linger, beside the floors: %+v", lingered)
	}
	if publish.Idempotence != "on" || publish.MessageIDs {
		t.Fatalf("publish by default: idempotence %q, message ids %v; want on, none", publish.Idempotence, publish.MessageIDs)
	}
	plain := runBenchJSON(t, "--count", "2000", "--idempotence", "off")
	if plain.Records != 2000 || plain.Idempotence != "off" {
		t.Fatalf("publish with idempotence off: %+v", plain)
	}
	// Every record's id is its own: a duplicate would be acknowledged
	// without being stored, and the stream would hold fewer records.
	identified := runBenchJSON(t, "--mode", "subscribe", "--count", "3000", "--producers", "3", "--msg-id")
	if identified.Records != 3000 || !identified.MessageIDs || identified.ConsumedRecords != 3000 {
		t.Fatalf("subscribe to records with message ids: %+v", identified)
	}
	edge := runBenchJSON(t, "--count", "1000", "--profile", "edge-tiny")
	if edge.Records != 1000 || edge.BrokerProfile != "edge-tiny" {
		t.Fatalf("publish to an edge-tiny broker: %+v", edge)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--duration", "1s", "--count", "10"},
		{"--addr", "127.0.0.1:7777"},
		{"--mode", "sideways"},
		{"--payload-bytes", "4"},
		{"--consume-tier", "bulk"},
		{"--duration", "soon"},
		{"--filter", "bench.s1"},
		{"--mode", "subscribe", "--filter", "bench.s1"},
		{"--mode", "subscribe", "--subjects", "10", "--filter", "bench..s1"},
		{"--mode", "subscribe", "--filter-sparse", "100", "--subjects", "10"},
		{"--subjects", "-1"},
		{"--addr", "127.0.0.1:7777", "--i-understand-this-is-live", "--profile", "edge-tiny"},
		{"--addr", "127.0.0.1:7777", "--i-understand-this-is-live", "--tls"},
		{"--addr", "127.0.0.1:7777", "--i-understand-this-is-live", "--floor"},
		{"--addr", "127.0.0.1:7777", "--i-understand-this-is-live", "--commit-linger", "2ms"},
		{"--commit-linger", "1s"},
		{"--commit-linger", "-1ms"},
		{"--commit-linger", "2ms", "--durability", "none"},
		{"--idempotence", "maybe"},
	} {
		result := runCLI(t, append([]string{"bench"}, args...)...)
		expectCode(t, result, exitUsage)
	}
}
