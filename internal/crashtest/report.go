package crashtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironbus/ironbus/segment"
)

// Torn sums the torn tails recoveries truncated.
type Torn struct {
	Logs  int
	Bytes int64
}

// CheckReport fails t unless recovery after a crash or power cut cost at
// most unacknowledged bytes past the last commit frame: no log reports
// data loss, none is frozen, and each torn tail's events account for its
// bytes. what names the round in the failure. It returns the torn tails.
func CheckReport(t testing.TB, report segment.RecoveryReport, what string) Torn {
	t.Helper()
	var torn Torn
	for _, log := range report.Logs {
		if log.HasDataLoss() || log.Outcome == segment.OutcomeFrozen {
			t.Fatalf("%s: recovery reported %s for %s/%d: %+v", what, log.Outcome, log.Stream, log.Partition, log)
		}
		if log.TornTailBytes > 0 {
			accounted := int64(0)
			for _, event := range log.Events {
				accounted += event.Bytes
			}
			if accounted != log.TornTailBytes {
				t.Fatalf("%s: %d torn bytes reported for %s/%d, its events account for %d: %+v",
					what, log.TornTailBytes, log.Stream, log.Partition, accounted, log)
			}
			torn.Logs++
			torn.Bytes += log.TornTailBytes
		}
	}
	return torn
}

// ReadReport reads the recovery report a broker wrote into dataDir when it
// opened it (recovery-report.json).
func ReadReport(t testing.TB, dataDir string) segment.RecoveryReport {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dataDir, "recovery-report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var report segment.RecoveryReport
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatalf("recovery-report.json: %v\n%s", err, data)
	}
	return report
}
