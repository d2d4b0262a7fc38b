package main

import (
	"fmt"
	"os"
	"time"

	"github.com/ironbus/ironbus/benchrig/floor"
)

// Sizes of the produce shapes, the same on both sides.
const (
	manyProducers  = 8
	manyWindow     = 512  // P2b: per producer
	singleWindow   = 4096 // P2c: one connection
	consumePayload = 256
)

// progress tells the operator what runs now; the table goes to stdout.
func progress(format string, arguments ...any) {
	fmt.Fprintf(os.Stderr, "peers: "+format+"\n", arguments...)
}

// measureRun runs every phase once, one peer after the other, never two
// brokers at once (client and server share the machine's cores); only the
// raw loop and the TCP floor run while IronBus's broker idles.
func measureRun(cfg *config, measured samples) error {
	phases := []struct {
		name string
		run  func(*config, samples) error
	}{
		{"raw bandwidth", rawPhase},
		{"ironbus", ironbusPhase},
		{"jetstream-always", func(cfg *config, measured samples) error { return jetstreamPhase(cfg, measured, true) }},
		{"jetstream-default", func(cfg *config, measured samples) error { return jetstreamPhase(cfg, measured, false) }},
		{"nats-core", corePhase},
		{"consume", consumePhase},
	}
	for _, phase := range phases {
		began := time.Now()
		if err := phase.run(cfg, measured); err != nil {
			return fmt.Errorf("%s: %w", phase.name, err)
		}
		progress("  %s done in %.1f s", phase.name, time.Since(began).Seconds())
	}
	return nil
}

// rawPhase measures durable sequential bandwidth. The small-write raw
// loop runs inside the IronBus phase instead, around the cells it is
// compared with (ironbusRows).
func rawPhase(cfg *config, measured samples) error {
	best := 0.0
	for _, direct := range []bool{false, true} {
		bandwidth, err := rawBandwidth(cfg.dir, cfg.duration, direct)
		if err != nil && !direct {
			return err
		}
		best = max(best, bandwidth) // direct may be unsupported: then buffered stands
	}
	measured.add(metric{labelRawDisk, "bandwidth", 0}, best)
	return nil
}

// produceShape is one produce row on either side.
type produceShape struct {
	row         string
	connections int
	window      int // 0: awaited, one in flight
}

var produceShapes = []produceShape{
	{"P1", 1, 0}, {"P2a", manyProducers, 0}, {"P2b", manyProducers, manyWindow}, {"P2c", 1, singleWindow},
}

func ironbusPhase(cfg *config, measured samples) error {
	for _, size := range cfg.sizes {
		broker, err := startIronBus(cfg.dir)
		if err != nil {
			return err
		}
		cfg.backend = broker.backend
		err = ironbusRows(cfg, measured, broker.addr, size)
		broker.stop()
		if err != nil {
			return err
		}
	}
	return nil
}

// ironbusRows measures IronBus's produce rows at one payload size, with
// the raw loop and the TCP floor (package benchrig/floor) beside P1 and L1.
//
// The disk's sync rate drifts by 10-20 % within a minute on the machines
// this runs on, so a raw loop measured in a phase of its own, tens of
// seconds away, says as much about the drift as about IronBus. Here the
// loop runs in three slices, one before P1, one between P1 and the floor,
// one after the floor, and again around L1 and the floor at the L1 rate;
// each cell it is compared with has a slice on either side, and the
// slices are pooled into the raw figures. The broker idles meanwhile.
func ironbusRows(cfg *config, measured samples, addr string, size int) error {
	loop, err := floor.OpenRawLoop(cfg.dir, size)
	if err != nil {
		return fmt.Errorf("raw loop %d B: %w", size, err)
	}
	defer loop.Close()
	if err := loop.RunBackToBack(cfg.duration / 3); err != nil {
		return fmt.Errorf("raw loop %d B: %w", size, err)
	}
	for _, shape := range produceShapes {
		if err := ironbusProduceRow(cfg, measured, addr, shape, size); err != nil {
			return err
		}
		if shape.row == "P1" {
			if err := floorBesideP1(cfg, measured, loop, size); err != nil {
				return err
			}
		}
	}
	if err := loop.RunAtRate(cfg.rate, cfg.latencyDuration/3); err != nil {
		return fmt.Errorf("raw loop at %d/s, %d B: %w", cfg.rate, size, err)
	}
	latencies, err := ironbusLatency(addr, fmt.Sprintf("L1-%d", size), size, cfg.rate, cfg.latencyDuration)
	if err != nil {
		return fmt.Errorf("L1 %d B: %w", size, err)
	}
	measured.add(metric{labelIronBus, "L1-p50", size}, percentile(latencies, 0.50))
	measured.add(metric{labelIronBus, "L1-p99", size}, percentile(latencies, 0.99))
	if err := floorBesideL1(cfg, measured, loop, size); err != nil {
		return err
	}
	measured.add(metric{labelRawDisk, "sync-rate", size}, loop.BackToBack.PerSecond())
	measured.add(metric{labelRawDisk, "L1-p50", size}, percentile(loop.BackToBack.Latencies, 0.50))
	measured.add(metric{labelRawDisk, "L1-p99", size}, percentile(loop.BackToBack.Latencies, 0.99))
	measured.add(metric{labelRawDisk, "L1-rate-p50", size}, percentile(loop.AtRate.Latencies, 0.50))
	measured.add(metric{labelRawDisk, "L1-rate-p99", size}, percentile(loop.AtRate.Latencies, 0.99))
	return nil
}

// floorBesideP1 runs the raw loop's second back-to-back slice, the TCP
// floor back to back, then the third slice.
func floorBesideP1(cfg *config, measured samples, loop *floor.RawLoop, size int) error {
	if err := loop.RunBackToBack(cfg.duration / 3); err != nil {
		return fmt.Errorf("raw loop %d B: %w", size, err)
	}
	perSecond, _, err := floor.TCP(loop, size, 0, cfg.duration)
	if err != nil {
		return fmt.Errorf("%d B: %w", size, err)
	}
	measured.add(metric{labelTCPFloor, "P1", size}, perSecond)
	if err := loop.RunBackToBack(cfg.duration / 3); err != nil {
		return fmt.Errorf("raw loop %d B: %w", size, err)
	}
	return nil
}

// floorBesideL1 is floorBesideP1 at the L1 rate.
func floorBesideL1(cfg *config, measured samples, loop *floor.RawLoop, size int) error {
	if err := loop.RunAtRate(cfg.rate, cfg.latencyDuration/3); err != nil {
		return fmt.Errorf("raw loop at %d/s, %d B: %w", cfg.rate, size, err)
	}
	_, latencies, err := floor.TCP(loop, size, cfg.rate, cfg.latencyDuration)
	if err != nil {
		return fmt.Errorf("%d B at %d/s: %w", size, cfg.rate, err)
	}
	measured.add(metric{labelTCPFloor, "L1-p50", size}, percentile(latencies, 0.50))
	measured.add(metric{labelTCPFloor, "L1-p99", size}, percentile(latencies, 0.99))
	if err := loop.RunAtRate(cfg.rate, cfg.latencyDuration/3); err != nil {
		return fmt.Errorf("raw loop at %d/s, %d B: %w", cfg.rate, size, err)
	}
	return nil
}

// ironbusProduceRow measures one produce shape (P1, P2a, P2b, P2c) on IronBus.
func ironbusProduceRow(cfg *config, measured samples, addr string, shape produceShape, size int) error {
	stream := fmt.Sprintf("%s-%d", shape.row, size)
	var result outcome
	var err error
	if shape.window == 0 {
		result, err = ironbusAwaited(addr, stream, shape.connections, size, cfg.duration)
	} else {
		result, err = ironbusPipelined(addr, stream, shape.connections, shape.window, size, cfg.duration)
	}
	if err != nil {
		return fmt.Errorf("%s %d B: %w", shape.row, size, err)
	}
	measured.add(metric{labelIronBus, shape.row, size}, result.perSecond())
	measured.add(metric{labelIronBus, shape.row + "-MBps", size}, result.perSecond()*float64(size)/1e6)
	return nil
}

// jetstreamPhase runs the produce rows on JetStream, with `sync_interval:
// always` or the default; L1 only with always (the durable comparison).
func jetstreamPhase(cfg *config, measured samples, always bool) error {
	label := labelJetStreamDefault
	if always {
		label = labelJetStreamAlways
	}
	for _, size := range cfg.sizes {
		ns, err := startNATS(cfg.dir, "", always)
		if err != nil {
			return err
		}
		err = jetstreamRows(cfg, measured, ns, label, size, always)
		ns.stop()
		if err != nil {
			return err
		}
	}
	return nil
}

func jetstreamRows(cfg *config, measured samples, ns *natsServer, label string, size int, always bool) error {
	for _, shape := range produceShapes {
		if err := ns.freshStream("BENCH"); err != nil {
			return err
		}
		var result outcome
		var err error
		if shape.window == 0 {
			result, err = natsAwaited(ns.url(), shape.connections, size, cfg.duration)
		} else {
			result, err = natsPipelined(ns.url(), shape.connections, shape.window, size, cfg.duration)
		}
		if err != nil {
			return fmt.Errorf("%s %d B: %w", shape.row, size, err)
		}
		measured.add(metric{label, shape.row, size}, result.perSecond())
	}
	if !always {
		return nil
	}
	if err := ns.freshStream("BENCH"); err != nil {
		return err
	}
	latencies, err := natsLatency(ns.url(), size, cfg.rate, cfg.latencyDuration)
	if err != nil {
		return fmt.Errorf("L1 %d B: %w", size, err)
	}
	measured.add(metric{label, "L1-p50", size}, percentile(latencies, 0.50))
	measured.add(metric{label, "L1-p99", size}, percentile(latencies, 0.99))
	return nil
}

// corePhase is NATS core pub/sub: one publisher, one subscriber.
func corePhase(cfg *config, measured samples) error {
	for _, size := range cfg.sizes {
		ns, err := startNATS(cfg.dir, "", false)
		if err != nil {
			return err
		}
		result, err := natsCorePubSub(ns.url(), size, cfg.duration, 0)
		ns.stop()
		if err != nil {
			return err
		}
		measured.add(metric{labelNATSCore, "pubsub", size}, result.perSecond())
	}
	return nil
}

// consumePhase is C1: the same number of stored 256 B messages drained
// by a work group with acks and read by a streaming reader on IronBus,
// by a pull consumer with explicit acks and an ordered consumer on
// JetStream (always), and delivered live by core NATS.
func consumePhase(cfg *config, measured samples) error {
	count := uint64(cfg.consumeMessages)
	broker, err := startIronBus(cfg.dir)
	if err != nil {
		return err
	}
	work, stream, err := ironbusConsumeRows(cfg, broker.addr)
	broker.stop()
	if err != nil {
		return err
	}
	measured.add(metric{labelIronBus, "C1-work", consumePayload}, work.perSecond())
	measured.add(metric{labelIronBus, "C1-stream", consumePayload}, stream.perSecond())

	storeDir, err := natsLoadStore(cfg.dir, cfg.consumeMessages, consumePayload)
	if err != nil {
		return err
	}
	defer os.RemoveAll(storeDir)
	ns, err := startNATS(cfg.dir, storeDir, true)
	if err != nil {
		return err
	}
	defer ns.stop()
	if work, err = natsWorkConsume(ns.url(), cfg.consumers, count); err != nil {
		return fmt.Errorf("jetstream pull consumer: %w", err)
	}
	measured.add(metric{labelJetStreamAlways, "C1-work", consumePayload}, work.perSecond())
	if stream, err = natsOrderedConsume(ns.url(), count); err != nil {
		return fmt.Errorf("jetstream ordered consumer: %w", err)
	}
	measured.add(metric{labelJetStreamAlways, "C1-stream", consumePayload}, stream.perSecond())
	core, err := natsCorePubSub(ns.url(), consumePayload, time.Minute, count)
	if err != nil {
		return err
	}
	measured.add(metric{labelNATSCore, "C1-stream", consumePayload}, core.perSecond())
	return nil
}

func ironbusConsumeRows(cfg *config, addr string) (work, stream outcome, err error) {
	count := uint64(cfg.consumeMessages)
	if err := ironbusLoad(addr, "c1", cfg.consumeMessages, consumePayload); err != nil {
		return work, stream, fmt.Errorf("load: %w", err)
	}
	if work, err = ironbusWorkConsume(addr, "c1", cfg.consumers, count); err != nil {
		return work, stream, fmt.Errorf("work group: %w", err)
	}
	if stream, err = ironbusStreamConsume(addr, "c1", count); err != nil {
		return work, stream, fmt.Errorf("streaming: %w", err)
	}
	return work, stream, nil
}
