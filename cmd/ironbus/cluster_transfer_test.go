//go:build unix

package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironbus/ironbus/internal/histcheck"
)

// TestClusterTransferMovesTheLeader: on three real broker processes, the
// CLI moves the leadership of a replicated partition to another node and
// back while a writer produces through the seed list. cluster status then
// names the new leader, the writer keeps getting acks across each move,
// and every acknowledged record is in the partition once, at its offset.
// The pause the brokers measured and the longest gap between two acks
// are logged.
func TestClusterTransferMovesTheLeader(t *testing.T) {
	nodes := startClusterNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createReplicatedStream(ctx, t, nodes)
	leader := nodes.leaderWithin(ctx, 20*time.Second)
	if leader == 0 {
		t.Fatal("no leader 20 s after the stream's creation")
	}

	history := &histcheck.Recorder{}
	began := time.Now()
	now := func() int64 { return int64(time.Since(began)) }
	writing, stopWriting := context.WithCancel(ctx)
	var acked, lastAck atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { writeNumbered(writing, nodes, history, now, &acked, &lastAck) })
	awaitAcks(t, &acked, 20)

	target := leader%3 + 1
	movedAt := now()
	result := runCLI(t, "cluster", "transfer", "--stream", clusterStream, "--partition", "0",
		"--to", strconv.Itoa(int(target)), "--addr", nodes.seeds(), "--json")
	expectCode(t, result, exitClean)
	var moved clusterTransferOutput
	if err := json.Unmarshal([]byte(result.stdout), &moved); err != nil {
		t.Fatalf("cluster transfer --json printed %q: %v", result.stdout, err)
	}
	if moved.Schema != clusterTransferSchema || moved.From != leader || moved.Leader != target || !moved.Moved || moved.ElapsedUs <= 0 {
		t.Fatalf("moving the leader from node %d to node %d printed %+v", leader, target, moved)
	}
	awaitStatusLeader(t, nodes, target)
	awaitAcks(t, &acked, 20)
	pauseThere := longestPause(history.Operations(), movedAt)

	// And back, with the human output.
	movedBackAt := now()
	back := runCLI(t, "cluster", "transfer", "--stream", clusterStream, "--to", strconv.Itoa(int(leader)), "--addr", nodes.seeds())
	expectCode(t, back, exitClean)
	want := "partition " + clusterStream + "/0: leader moved from node " + strconv.Itoa(int(target)) + " to node " + strconv.Itoa(int(leader)) + " in "
	if !strings.HasPrefix(back.stdout, want) {
		t.Fatalf("moving the leader back printed %q, want it to start %q", back.stdout, want)
	}
	awaitStatusLeader(t, nodes, leader)
	awaitAcks(t, &acked, 20)
	pauseBack := longestPause(history.Operations(), movedBackAt)

	stay := runCLI(t, "cluster", "transfer", "--stream", clusterStream, "--to", strconv.Itoa(int(leader)), "--addr", nodes.seeds())
	expectCode(t, stay, exitClean)
	if !strings.Contains(stay.stdout, "already leads") {
		t.Fatalf("a transfer to the leader printed %q", stay.stdout)
	}
	refused := runCLI(t, "cluster", "transfer", "--stream", clusterStream, "--to", "9", "--addr", nodes.seeds())
	expectCode(t, refused, exitRefused)

	stopWriting()
	wg.Wait()
	final := readPartition(ctx, t, nodes)
	h := histcheck.History{Operations: history.Operations(), Partitions: map[uint32]histcheck.Partition{0: {Final: final}}}
	if err := histcheck.CheckLog(h); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d to node %d: the brokers measured %v, the longest gap between acks after it was %v; back: %s; "+
		"longest gap %v; %d acks", leader, target, time.Duration(moved.ElapsedUs)*time.Microsecond, pauseThere,
		strings.TrimSpace(back.stdout), pauseBack, acked.Load())
}

// awaitAcks waits, up to 10 s, for n more acknowledged records.
func awaitAcks(t *testing.T, acked *atomic.Int64, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for from := acked.Load(); acked.Load() < from+n; {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d acks in 10 s (%d in all)", n, acked.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitStatusLeader waits, up to 5 s, until cluster status --json names
// node want as the partition's leader (a member asked may learn of a
// new leader a heartbeat late).
func awaitStatusLeader(t *testing.T, nodes *clusterNodes, want uint32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		result := runCLI(t, "cluster", "status", "--addr", nodes.seeds(), "--json")
		expectCode(t, result, exitClean)
		var status clusterOutput
		if err := json.Unmarshal([]byte(result.stdout), &status); err != nil {
			t.Fatalf("cluster status --json printed %q: %v", result.stdout, err)
		}
		if len(status.Partitions) == 1 && status.Partitions[0].Leader == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster status names no leader %d: %s", want, result.stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
