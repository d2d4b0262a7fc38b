package broker

import (
	"fmt"
	"testing"
	"time"
)

func TestZZMeasurePass(t *testing.T) {
	b := openRetentionBroker(t, Config{Retention: RetentionConfig{Stream: StreamRetention{MaxBytes: 1 << 30}, DiskBudget: 1 << 30}}, newClocks())
	for s := range 20 {
		name := fmt.Sprint("s", s)
		for g := range 5 {
			streamingGroup(t, b, name, fmt.Sprint("g", g), 0)
		}
		fillLog(t, streamLog(t, b, name), 150)
	}
	start := time.Now()
	const n = 50
	for range n {
		b.retentionPass()
	}
	used, _ := b.measureDisk(b.cfg.DataDir)
	t.Logf("pass over 20 streams x ~11 segments x 5 groups (%d bytes on disk): %v per pass", used, time.Since(start)/n)
}
