package main

import (
	"errors"
	"fmt"
	"time"
)

// verifyLabels counts fsync and fdatasync calls while each side serves an
// awaited producer (P1) and 8 pipelined producers (P2b) at 256 B, so the
// labels in the table are observed, not assumed.
func verifyLabels(cfg *config) ([]labelCheck, error) {
	type workload struct {
		name string
		run  func(url string) (outcome, error)
	}
	ironbusWorkloads := []workload{
		{"P1 awaited", func(addr string) (outcome, error) {
			return ironbusAwaited(addr, "verify-p1", 1, 256, cfg.verifyDuration)
		}},
		{"P2b 8x512 pipelined", func(addr string) (outcome, error) {
			return ironbusPipelined(addr, "verify-p2b", manyProducers, manyWindow, 256, cfg.verifyDuration)
		}},
	}
	natsWorkloads := []workload{
		{"P1 awaited", func(url string) (outcome, error) { return natsAwaited(url, 1, 256, cfg.verifyDuration) }},
		{"P2b 8x512 pipelined", func(url string) (outcome, error) {
			return natsPipelined(url, manyProducers, manyWindow, 256, cfg.verifyDuration)
		}},
	}
	var checks []labelCheck
	for _, w := range ironbusWorkloads {
		broker, err := startIronBus(cfg.dir)
		if err != nil {
			return checks, err
		}
		check, err := traced(labelIronBus, w.name, func() (outcome, error) { return w.run(broker.addr) })
		broker.stop()
		if err != nil {
			return checks, err
		}
		checks = append(checks, check)
	}
	for _, always := range []bool{true, false} {
		label := map[bool]string{true: labelJetStreamAlways, false: labelJetStreamDefault}[always]
		for _, w := range natsWorkloads {
			check, err := tracedNATS(cfg, always, label, w.name, w.run)
			if err != nil {
				return checks, err
			}
			checks = append(checks, check)
		}
	}
	return checks, nil
}

func tracedNATS(cfg *config, always bool, label, name string, run func(string) (outcome, error)) (labelCheck, error) {
	ns, err := startNATS(cfg.dir, "", always)
	if err != nil {
		return labelCheck{}, err
	}
	defer ns.stop()
	// The stream is created before tracing: its creation syncs too.
	if err := ns.freshStream("BENCH"); err != nil {
		return labelCheck{}, err
	}
	return traced(label, name, func() (outcome, error) { return run(ns.url()) })
}

func traced(side, name string, run func() (outcome, error)) (labelCheck, error) {
	began := time.Now()
	messages, fsync, fdatasync, err := countSyncs(func() (uint64, error) {
		result, err := run()
		return result.messages, err
	})
	if errors.Is(err, errNoStrace) {
		return labelCheck{}, err
	}
	if err != nil {
		return labelCheck{}, fmt.Errorf("%s %s under strace: %w", side, name, err)
	}
	check := labelCheck{Side: side, Workload: name, Messages: messages, Fsync: fsync, Fdatasync: fdatasync}
	if messages > 0 {
		check.PerMessage = float64(fsync+fdatasync) / float64(messages)
	}
	check.Conclusion = conclude(check)
	progress("  %s %s: %d messages, %d fsync, %d fdatasync (%.1f s)", side, name, messages, fsync, fdatasync, time.Since(began).Seconds())
	return check, nil
}
