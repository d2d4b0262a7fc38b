// Package logbench measures durable appends through the segment engine on
// a real disk.
package logbench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// Config is one append measurement.
type Config struct {
	Dir         string
	RecordBytes int // stored body size
	Producers   int
	InFlight    int // appends each producer keeps in flight
	Logs        int // producers are spread over this many logs
	Duration    time.Duration
	Options     segment.Options
}

// Result is what one append measurement achieved.
type Result struct {
	RecordBytes    int     `json:"record_bytes"`
	Producers      int     `json:"producers"`
	Logs           int     `json:"logs"`
	RecordsPerSec  float64 `json:"records_per_sec"`
	MBPerSec       float64 `json:"mb_per_sec"`
	SyncsPerSec    float64 `json:"syncs_per_sec"`
	RecordsPerSync float64 `json:"records_per_sync"`
	MeanSyncMicros float64 `json:"mean_sync_us"`
	CyclesPerSec   float64 `json:"committer_cycles_per_sec"`
	// DeviceBytesPerPayloadByte is what the device wrote (journal and
	// preallocation included) per record byte acknowledged; 0 when the
	// platform cannot tell.
	DeviceBytesPerPayloadByte float64 `json:"device_bytes_per_payload_byte"`
	IOMode                    string  `json:"io_mode"`
	Preallocation             string  `json:"preallocation"`
	DurationSeconds           float64 `json:"duration_s"`
}

// Run appends from cfg.Producers goroutines, each keeping cfg.InFlight
// appends outstanding, for cfg.Duration, and counts durable completions.
func Run(cfg Config) (Result, error) {
	dir, err := os.MkdirTemp(cfg.Dir, "logbench-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	d, err := segment.Open(vfs.OS{}, dir, cfg.Options)
	if err != nil {
		return Result{}, err
	}
	defer d.Close()
	logs := make([]*segment.Log, max(cfg.Logs, 1))
	for i := range logs {
		if logs[i], err = d.OpenLog(segment.LogID{Stream: fmt.Sprintf("bench-%d", i)}); err != nil {
			return Result{}, err
		}
	}
	body := makeBody(cfg.RecordBytes)
	bodyCRC := record.Checksum(body)
	var done atomic.Uint64
	var failure atomic.Pointer[error]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	before := d.Stats()
	deviceBefore, deviceErr := deviceWrittenBytes(dir)
	start := time.Now()
	for p := 0; p < cfg.Producers; p++ {
		wg.Add(1)
		go func(l *segment.Log) {
			defer wg.Done()
			if err := produce(l, body, bodyCRC, cfg.InFlight, stop, &done); err != nil {
				failure.CompareAndSwap(nil, &err)
			}
		}(logs[p%len(logs)])
	}
	time.Sleep(cfg.Duration)
	elapsed := time.Since(start)
	records := done.Load()
	after := d.Stats()
	deviceAfter, _ := deviceWrittenBytes(dir)
	close(stop)
	wg.Wait()
	if errp := failure.Load(); errp != nil {
		return Result{}, *errp
	}
	result := summarize(cfg, d, records, elapsed, before, after)
	if deviceErr == nil && records > 0 {
		result.DeviceBytesPerPayloadByte = float64(deviceAfter-deviceBefore) / (float64(records) * float64(cfg.RecordBytes))
	}
	return result, nil
}

func summarize(cfg Config, d *segment.Dir, records uint64, elapsed time.Duration, before, after segment.CommitterStats) Result {
	seconds := elapsed.Seconds()
	syncs := float64(after.Syncs - before.Syncs)
	r := Result{RecordBytes: cfg.RecordBytes, Producers: cfg.Producers, Logs: max(cfg.Logs, 1),
		RecordsPerSec: float64(records) / seconds, MBPerSec: float64(records) * float64(cfg.RecordBytes) / seconds / 1e6,
		SyncsPerSec: syncs / seconds, CyclesPerSec: float64(after.Cycles-before.Cycles) / seconds,
		IOMode: d.IOMode().String(), Preallocation: cfg.Options.Preallocation.String(), DurationSeconds: seconds}
	if syncs > 0 {
		r.RecordsPerSync = float64(records) / syncs
		r.MeanSyncMicros = float64(after.SyncNanos-before.SyncNanos) / syncs / 1e3
	}
	return r
}

// produce keeps up to inFlight appends outstanding, waiting on the oldest
// when the window is full, until stop closes.
func produce(l *segment.Log, body []byte, bodyCRC uint32, inFlight int, stop <-chan struct{}, done *atomic.Uint64) error {
	window := make([]segment.Ticket, 0, inFlight)
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if len(window) == inFlight {
			if err := window[0].Wait(ctx); err != nil {
				return err
			}
			done.Add(1)
			window = window[1:]
			// Collect whatever else already completed without blocking.
			for len(window) > 0 {
				select {
				case <-window[0].Done():
					if err := window[0].Err(); err != nil {
						return err
					}
					done.Add(1)
					window = window[1:]
					continue
				default:
				}
				break
			}
			if cap(window)-len(window) < inFlight/2 {
				window = append(make([]segment.Ticket, 0, inFlight), window...)
			}
		}
		ticket, err := l.Append(ctx, body, bodyCRC)
		if err != nil {
			return err
		}
		window = append(window, ticket)
	}
}

// makeBody returns an encoded record body of exactly size bytes.
func makeBody(size int) []byte {
	payload := make([]byte, max(size-record.BodyFixedSize-8, 0))
	for i := range payload {
		payload[i] = byte(i * 31)
	}
	body, err := record.AppendBody(nil, record.Body{Key: []byte("bench-ke"), Payload: payload})
	if err != nil {
		panic(err)
	}
	return body
}

// Host describes the machine for the report.
func Host() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s %s/%s %d CPUs %s", host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
}
