package peerlink

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkPairSmallMessages sends 100-byte messages from node 1 to node 2
// over loopback TCP, spread over 64 channels, and reports messages per
// second delivered to the Handler. A full queue makes the sender yield
// and retry, so every message is delivered.
func BenchmarkPairSmallMessages(b *testing.B) {
	var received atomic.Int64
	nodes := startCluster(b, 2, func(config *Config) {
		config.Handler = func(NodeID, uint64, []byte) { received.Add(1) }
	})
	for !peerStatus(nodes[0].link, 2).Connected {
		time.Sleep(time.Millisecond)
	}
	payload := make([]byte, 100)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	began := time.Now()
	sent := int64(0)
	for b.Loop() {
		for !nodes[0].link.Send(2, uint64(sent%64), payload) {
			runtime.Gosched()
		}
		sent++
	}
	for received.Load() < sent {
		runtime.Gosched()
	}
	b.ReportMetric(float64(sent)/time.Since(began).Seconds(), "msgs/s")
}
