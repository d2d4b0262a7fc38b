package main

import (
	"fmt"
	"strings"
)

// consumeNote says how the consume rows' data was loaded and read.
func consumeNote(cfg *config) string {
	return fmt.Sprintf("%d stored 256 B messages. IronBus loaded them through its pipelined producer (window 4,096, "+
		"fsynced like every IronBus ack); JetStream through async publish under its default sync (the fast path), "+
		"then the server was restarted with sync_interval: always before the clock started. %d consumers each side.",
		cfg.consumeMessages, cfg.consumers)
}

// rowSpecs declares the table. The targets are the ones docs/BENCHMARKS.md
// reads the rows against; rows without a target are context.
func rowSpecs(cfg *config) []rowSpec {
	var specs []rowSpec
	for _, size := range cfg.sizes {
		specs = append(specs, produceRows(size)...)
	}
	specs = append(specs, rowSpec{id: "BW", title: "durable MB/s: IronBus P2b 1 KiB vs raw 1 MiB write+fdatasync", payload: 1024, unit: "MB/s",
		ironbus: metric{labelIronBus, "P2b-MBps", 1024}, peer: metric{labelRawDisk, "bandwidth", 0},
		note: "raw: the faster of buffered and O_DIRECT 1 MiB writes into a fallocated file"})
	return append(specs, consumeRows(cfg)...)
}

func produceRows(size int) []rowSpec {
	always := func(id, title string, target float64) rowSpec {
		return rowSpec{id: id, title: title, payload: size, unit: "msg/s", target: target,
			ironbus: metric{labelIronBus, id, size}, peer: metric{labelJetStreamAlways, id, size}}
	}
	unsynced := func(id, title string, target float64) rowSpec {
		return rowSpec{id: id, title: title + ": IronBus fsynced vs JetStream unsynced", payload: size, unit: "msg/s",
			target: target, crossDurability: true,
			ironbus: metric{labelIronBus, id, size}, peer: metric{labelJetStreamDefault, id, size}}
	}
	latency := func(id, peer string, target float64) rowSpec {
		title := "ack latency at 1,000 msg/s (open loop) vs JetStream always"
		switch peer {
		case labelRawDisk:
			title = "ack latency at 1,000 msg/s vs raw write+fdatasync back to back"
		case labelTCPFloor:
			title = "ack latency at 1,000 msg/s vs the TCP floor at 1,000 msg/s"
		}
		return rowSpec{id: id, title: title, payload: size, unit: "µs", lowerIsBetter: true, target: target,
			ironbus: metric{labelIronBus, id, size}, peer: metric{peer, id, size}}
	}
	atRate := func(id string, target float64) rowSpec {
		return rowSpec{id: id, title: "ack latency at 1,000 msg/s vs raw write+fdatasync at 1,000/s", payload: size,
			unit: "µs", lowerIsBetter: true, target: target, ironbus: metric{labelIronBus, id, size},
			peer: metric{labelRawDisk, strings.Replace(id, "L1-", "L1-rate-", 1), size},
			note: "raw at the same rate: the machine idles between syncs as it does between L1's produces; " +
				"run in three slices of a third of L1's length, before L1, between L1 and the TCP floor, after the floor, pooled"}
	}
	return []rowSpec{
		always("P1", "awaited produce, 1 connection, 1 in flight", 2),
		always("P2a", "8 producers, 1 in flight each", 5),
		always("P2b", "8 producers, pipelined, window 512 each", 50),
		always("P2c", "1 connection, pipelined, window 4,096", 50),
		latency("L1-p50", labelJetStreamAlways, 0),
		latency("L1-p99", labelJetStreamAlways, 0),
		latency("L1-p50", labelRawDisk, 1.3),
		latency("L1-p99", labelRawDisk, 1.2),
		atRate("L1-p50", 1.3),
		atRate("L1-p99", 1.2),
		latency("L1-p50", labelTCPFloor, 0),
		latency("L1-p99", labelTCPFloor, 0),
		{id: "P1-disk", title: "P1 vs raw write+fdatasync loop (syncs/s)", payload: size, unit: "msg/s", target: 0.9,
			ironbus: metric{labelIronBus, "P1", size}, peer: metric{labelRawDisk, "sync-rate", size},
			note: "raw loop: three slices of a third of a cell, before P1, between P1 and the TCP floor, after the floor, " +
				"on one zero-filled file, pooled (the disk's rate drifts within a minute)"},
		{id: "P1-floor", title: "P1 vs the TCP floor back to back", payload: size, unit: "msg/s",
			ironbus: metric{labelIronBus, "P1", size}, peer: metric{labelTCPFloor, "P1", size},
			note: "TCP floor: one goroutine reads each message over loopback, writes and fdatasyncs it, answers; no broker"},
		{id: "floor-disk", title: "the TCP floor vs raw write+fdatasync loop (what any TCP service keeps)", payload: size,
			unit: "msg/s", note: "the left side of this row is the TCP floor, not IronBus",
			ironbus: metric{labelTCPFloor, "P1", size}, peer: metric{labelRawDisk, "sync-rate", size}},
		unsynced("P1", "P1", 0),
		unsynced("P2a", "P2a", 0),
		unsynced("P2b", "P2b", 3),
		unsynced("P2c", "P2c", 0),
		{id: "P-core", title: "P2c: IronBus fsynced vs NATS core pub/sub (at most once)", payload: size, unit: "msg/s",
			crossDurability: true, ironbus: metric{labelIronBus, "P2c", size}, peer: metric{labelNATSCore, "pubsub", size},
			note: "NATS core: 1 publisher, 1 subscriber, counted as received"},
	}
}

func consumeRows(cfg *config) []rowSpec {
	note := consumeNote(cfg)
	return []rowSpec{
		{id: "C1-work", title: "work group, Fetch 1,000 + AckRange vs JetStream pull, explicit acks", payload: consumePayload,
			unit: "msg/s", target: 2, note: note,
			ironbus: metric{labelIronBus, "C1-work", consumePayload}, peer: metric{labelJetStreamAlways, "C1-work", consumePayload}},
		{id: "C1-stream", title: "streaming read vs JetStream ordered consumer", payload: consumePayload, unit: "msg/s",
			note:    consumeStreamAPI + ". " + note,
			ironbus: metric{labelIronBus, "C1-stream", consumePayload}, peer: metric{labelJetStreamAlways, "C1-stream", consumePayload}},
		{id: "C1-stream", title: "C1-stream: IronBus stored+fsynced vs NATS core live delivery", payload: consumePayload,
			unit: "msg/s", target: 1.5, crossDurability: true,
			note:    consumeStreamAPI + "; NATS core: the same number of messages published live to 1 subscriber",
			ironbus: metric{labelIronBus, "C1-stream", consumePayload}, peer: metric{labelNATSCore, "C1-stream", consumePayload}},
	}
}
