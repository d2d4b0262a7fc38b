package main

import (
	"fmt"
	"os"
	"time"
)

// The subjects suite (-suite subjects): the head-to-head rows of routed
// publish and filtered reads (docs/STREAMS.md).
//
//   - S-pub-N: publish spread over N distinct subjects (1, 1,000, 10,000).
//     IronBus: one connection, pipelined (window 4,096, the P2c shape),
//     each record routed by its subject through one binding (bench.> → the
//     stream), fsynced before its ack. NATS core: one publisher and one
//     subscriber on bench.>, the same subjects, counted as received.
//   - S-route: IronBus with 10,000 subjects against IronBus with 1: what
//     routing costs as subjects grow (target: at most 5 % lost).
//   - F-*: filtered consume of stored data where 1 record in 100 carries
//     the subject f.match and the rest f.other. Traversal rate = stored
//     records / time to read through all of them (the filtered reader
//     receives only the 1 %). IronBus: client.Stream with and without the
//     filter; JetStream (always): an ordered consumer with and without
//     FilterSubjects on the same data. Each run reads the data through
//     filteredTraversals times each way, and every read is a sample. The
//     dirty pages of the earlier phases and of the load are written back
//     (sync) before each side's reads. IronBus opens each read's group
//     before the clock starts (its creation is a durable write, setup
//     rather than traversal); JetStream's ordered consumer is ephemeral
//     and in memory, and its first read creates it inside the clock.

// Subject suite sizes.
var subjectCounts = []int{1, 1000, 10000}

const (
	subjectPayload = 256
	sparseEvery    = 100 // 1 record in sparseEvery matches the filter
	// filteredTraversals is how often each side reads the stored data
	// through per run, with and without the filter (alternating), each
	// read with a new group or consumer: one filtered read of 200,000
	// records takes milliseconds, short enough for one descheduling on a
	// shared machine to move it by half, so every read is a sample and the
	// row takes the median of them all.
	filteredTraversals = 5
	sparseMatch        = "f.match"
	sparseOther        = "f.other"
	sparseBinding      = "f.>"
	subjectsBinding    = "bench.>"
	subjectsPrefix     = "bench.s"
	subjectsStream     = "subjects"
	filteredStream     = "filtered"
	jetstreamSparse    = "F"
	labelSubjectsRow   = "S-pub"
)

// subjectList is the n subjects a publisher cycles through.
func subjectList(n int) []string {
	list := make([]string, n)
	for i := range list {
		list[i] = fmt.Sprintf("%s%d", subjectsPrefix, i)
	}
	return list
}

// sparseSubject is the subject of stored record i: the last of every
// sparseEvery matches, so the data ends on a match and a filtered reader
// that has its last match has traversed everything.
func sparseSubject(i int) string {
	if i%sparseEvery == sparseEvery-1 {
		return sparseMatch
	}
	return sparseOther
}

// measureSubjects runs the subjects suite once.
func measureSubjects(cfg *config, measured samples) error {
	phases := []struct {
		name string
		run  func(*config, samples) error
	}{
		{"ironbus subjects", ironbusSubjectsPhase},
		{"nats-core subjects", natsSubjectsPhase},
		{"filtered consume", filteredPhase},
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

func ironbusSubjectsPhase(cfg *config, measured samples) error {
	for _, n := range subjectCounts {
		broker, err := startIronBus(cfg.dir)
		if err != nil {
			return err
		}
		cfg.backend = broker.backend
		result, err := ironbusRoutedPublish(broker.addr, subjectList(n), subjectPayload, cfg.duration)
		broker.stop()
		if err != nil {
			return fmt.Errorf("%d subjects: %w", n, err)
		}
		measured.add(metric{labelIronBus, subjectRow(n), subjectPayload}, result.perSecond())
	}
	return nil
}

func natsSubjectsPhase(cfg *config, measured samples) error {
	for _, n := range subjectCounts {
		ns, err := startNATS(cfg.dir, "", false)
		if err != nil {
			return err
		}
		result, err := natsCoreSubjects(ns.url(), subjectList(n), subjectsBinding, subjectPayload, cfg.duration, 0)
		ns.stop()
		if err != nil {
			return fmt.Errorf("%d subjects: %w", n, err)
		}
		measured.add(metric{labelNATSCore, subjectRow(n), subjectPayload}, result.perSecond())
	}
	return nil
}

// filteredPhase loads the sparse data on each side and reads it through
// with and without the filter.
func filteredPhase(cfg *config, measured samples) error {
	count := cfg.consumeMessages
	broker, err := startIronBus(cfg.dir)
	if err != nil {
		return err
	}
	all, sparse, err := ironbusFilteredRows(broker.addr, count)
	broker.stop()
	if err != nil {
		// A broker without filtered reads leaves its rows out; the
		// JetStream side still runs, so its numbers stand on their own.
		progress("  ironbus filtered rows left out: %v", err)
	} else {
		addOutcomes(measured, metric{labelIronBus, "F-all", subjectPayload}, all)
		addOutcomes(measured, metric{labelIronBus, "F-sparse", subjectPayload}, sparse)
	}

	storeDir, err := natsLoadSparse(cfg.dir, count, subjectPayload)
	if err != nil {
		return err
	}
	defer os.RemoveAll(storeDir)
	ns, err := startNATS(cfg.dir, storeDir, true)
	if err != nil {
		return err
	}
	defer ns.stop()
	settleWriteback()
	for range filteredTraversals {
		one, err := natsTraverse(ns.url(), uint64(count), "", uint64(count))
		if err != nil {
			return fmt.Errorf("jetstream ordered consumer: %w", err)
		}
		measured.add(metric{labelJetStreamAlways, "F-all", subjectPayload}, one.perSecond())
		if one, err = natsTraverse(ns.url(), uint64(count), sparseMatch, uint64(count/sparseEvery)); err != nil {
			return fmt.Errorf("jetstream filtered consumer: %w", err)
		}
		measured.add(metric{labelJetStreamAlways, "F-sparse", subjectPayload}, one.perSecond())
	}
	return nil
}

// addOutcomes adds each traversal's rate as a sample of m.
func addOutcomes(measured samples, m metric, outcomes []outcome) {
	for _, one := range outcomes {
		measured.add(m, one.perSecond())
	}
}

func subjectRow(n int) string { return fmt.Sprintf("%s-%d", labelSubjectsRow, n) }

// subjectRowSpecs declares the subjects suite's table.
func subjectRowSpecs(cfg *config) []rowSpec {
	return append(publishRowSpecs(), filteredRowSpecs(cfg)...)
}

// measureFiltered runs only the filtered-consume rows (-suite filtered):
// the quick loop for work on the filtered read path.
func measureFiltered(cfg *config, measured samples) error {
	began := time.Now()
	if err := filteredPhase(cfg, measured); err != nil {
		return fmt.Errorf("filtered consume: %w", err)
	}
	progress("  filtered consume done in %.1f s", time.Since(began).Seconds())
	return nil
}

// publishRowSpecs declares the routed-publish rows.
func publishRowSpecs() []rowSpec {
	var specs []rowSpec
	for _, n := range subjectCounts {
		id := subjectRow(n)
		specs = append(specs, rowSpec{id: id, payload: subjectPayload, unit: "msg/s", crossDurability: true,
			title:   fmt.Sprintf("publish over %d subject(s): IronBus routed+fsynced vs NATS core (at most once)", n),
			note:    "IronBus: 1 connection, window 4,096, routed by subject through bench.>; NATS core: 1 publisher, 1 subscriber on bench.>",
			ironbus: metric{labelIronBus, id, subjectPayload}, peer: metric{labelNATSCore, id, subjectPayload}})
	}
	last := subjectCounts[len(subjectCounts)-1]
	specs = append(specs, rowSpec{id: "S-route", payload: subjectPayload, unit: "msg/s", target: 0.95,
		title:   fmt.Sprintf("IronBus publish over %d subjects vs over 1 (routing cost)", last),
		ironbus: metric{labelIronBus, subjectRow(last), subjectPayload}, peer: metric{labelIronBus, subjectRow(1), subjectPayload}})
	return specs
}

// filteredRowSpecs declares the filtered-consume rows.
func filteredRowSpecs(cfg *config) []rowSpec {
	note := fmt.Sprintf("%d stored 256 B records, 1 in %d with subject %s (the rest %s); traversal = stored records / time to read through them, "+
		"each of %d reads per run a sample (IronBus opens its group, a durable write, before the clock; JetStream's ephemeral ordered consumer is created inside it). "+
		"IronBus: client.Stream, one partition; JetStream: ordered consumer, FilterSubjects for the filtered read",
		cfg.consumeMessages, sparseEvery, sparseMatch, sparseOther, filteredTraversals)
	return []rowSpec{
		{id: "F-all", title: "unfiltered streaming read vs JetStream ordered consumer", payload: subjectPayload, unit: "rec/s",
			note: note, ironbus: metric{labelIronBus, "F-all", subjectPayload}, peer: metric{labelJetStreamAlways, "F-all", subjectPayload}},
		{id: "F-sparse", title: "1-in-100 filtered read, traversal vs JetStream filtered consumer", payload: subjectPayload, unit: "rec/s",
			target: 10, note: note,
			ironbus: metric{labelIronBus, "F-sparse", subjectPayload}, peer: metric{labelJetStreamAlways, "F-sparse", subjectPayload}},
		{id: "F-ratio", title: "IronBus 1-in-100 filtered traversal vs its unfiltered read", payload: subjectPayload, unit: "rec/s",
			target: 0.8, note: note,
			ironbus: metric{labelIronBus, "F-sparse", subjectPayload}, peer: metric{labelIronBus, "F-all", subjectPayload}},
		{id: "F-js", title: "JetStream filtered traversal vs its unfiltered read (context)", payload: subjectPayload, unit: "rec/s",
			note:    "both sides are JetStream here: the ratio shows what its filter costs",
			ironbus: metric{labelJetStreamAlways, "F-sparse", subjectPayload}, peer: metric{labelJetStreamAlways, "F-all", subjectPayload}},
	}
}
