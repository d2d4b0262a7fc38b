package segment

import (
	"context"
	"strconv"
	"testing"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment/vfs"
)

// BenchmarkAppend measures the CPU cost of the append path (staging,
// framing, the appender's write into the page cache) from one producer
// with 256 appends in flight, with syncs turned off so the device is out of
// the picture. Durable numbers come from benchrig/cmd/logbench.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{256, 1024, 16384} {
		b.Run(sizeName(size), func(b *testing.B) {
			opts := testOptions(1)
			opts.SegmentSize = 64 << 20
			opts.StagingBytes = DefaultStagingBytes
			opts.Durability, opts.AcceptRelaxedDurability = DurabilityNone, true
			d, err := Open(vfs.OS{}, b.TempDir(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			l, err := d.OpenLog(defaultLog)
			if err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, size)
			crc := record.Checksum(payload)
			window := make([]Ticket, 0, 256)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if len(window) == cap(window) {
					if err := window[0].Wait(context.Background()); err != nil {
						b.Fatal(err)
					}
					window = append(window[:0], window[1:]...)
				}
				ticket, err := l.Append(context.Background(), payload, crc)
				if err != nil {
					b.Fatal(err)
				}
				window = append(window, ticket)
			}
			for _, ticket := range window {
				_ = ticket.Wait(context.Background())
			}
		})
	}
}

// BenchmarkAppendBatch measures the append path for batches of 16
// records of 256 bytes, ordinary ("plain", AppendBatch) and atomic
// (AppendAtomic), as BenchmarkAppend does for single records: the atomic
// bookkeeping costs only atomic batches, and the plain path stays as
// cheap as before (compare BenchmarkAppend across versions).
func BenchmarkAppendBatch(b *testing.B) {
	for _, mode := range []string{"plain", "atomic"} {
		b.Run(mode, func(b *testing.B) {
			opts := testOptions(1)
			opts.SegmentSize = 64 << 20
			opts.StagingBytes = DefaultStagingBytes
			opts.Durability, opts.AcceptRelaxedDurability = DurabilityNone, true
			d, err := Open(vfs.OS{}, b.TempDir(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			l, err := d.OpenLog(defaultLog)
			if err != nil {
				b.Fatal(err)
			}
			bodies, crcs := make([][]byte, 16), make([]uint32, 16)
			for i := range bodies {
				bodies[i] = make([]byte, 256)
				crcs[i] = record.Checksum(bodies[i])
			}
			appendBatch := l.AppendBatch
			if mode == "atomic" {
				appendBatch = l.AppendAtomic
			}
			window := make([]Ticket, 0, 64)
			b.SetBytes(16 * 256)
			b.ReportAllocs()
			for b.Loop() {
				if len(window) == cap(window) {
					if err := window[0].Wait(context.Background()); err != nil {
						b.Fatal(err)
					}
					window = append(window[:0], window[1:]...)
				}
				ticket, err := appendBatch(context.Background(), bodies, crcs)
				if err != nil {
					b.Fatal(err)
				}
				window = append(window, ticket)
			}
			for _, ticket := range window {
				_ = ticket.Wait(context.Background())
			}
		})
	}
}

// BenchmarkScanSegment measures validating a full segment image, the cost
// of recovering the unsealed tail and of the first read of a sealed segment.
func BenchmarkScanSegment(b *testing.B) {
	mem := vfs.NewMemFS()
	opts := testOptions(2)
	opts.SegmentSize = 8 << 20
	d, err := Open(mem, "/data", opts)
	if err != nil {
		b.Fatal(err)
	}
	l, err := d.OpenLog(defaultLog)
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 256)
	var last Ticket
	for i := 0; i < 20000; i++ {
		last, _ = l.Append(context.Background(), payload, record.Checksum(payload))
	}
	_ = last.Wait(context.Background())
	seg := l.segments.Load().segments[0]
	_ = d.Close()
	data, err := vfs.ReadFile(mem, "/data/streams/default/0/"+seg.name)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		result := scanSegment(data, seg.header.Token, seg.base, record.DefaultMaxBody, scanLimits{End: int64(len(data)), TornAllowed: true})
		if result.Records != 20000 {
			b.Fatalf("scanned %d records", result.Records)
		}
	}
}

func sizeName(size int) string {
	if size >= 1024 {
		return strconv.Itoa(size/1024) + "KiB"
	}
	return strconv.Itoa(size) + "B"
}

// BenchmarkOpenAfterCleanStop measures opening a data directory whose log
// was closed cleanly with a nearly full active segment, up to the log
// accepting appends: "marker" trusts the clean-stop marker, "scan" removes
// it first and scans the segment as after a crash (from the page cache, so
// a cold start scans slower still).
func BenchmarkOpenAfterCleanStop(b *testing.B) {
	for _, segmentSize := range []int64{64 << 20, 256 << 20} {
		root := b.TempDir()
		opts := testOptions(4)
		opts.SegmentSize = segmentSize
		opts.StagingBytes = DefaultStagingBytes
		fillCleanly(b, root, opts, segmentSize*15/16)
		for _, mode := range []string{"marker", "scan"} {
			b.Run(strconv.FormatInt(segmentSize>>20, 10)+"MiB/"+mode, func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					if mode == "scan" {
						_ = vfs.OS{}.Remove(root + "/streams/" + DefaultStream + "/0/" + cleanStopName)
					}
					b.StartTimer()
					d, err := Open(vfs.OS{}, root, opts)
					if err != nil {
						b.Fatal(err)
					}
					l, err := d.OpenLog(defaultLog)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if got := l.Report().CleanStop; got != (mode == "marker") {
						b.Fatalf("clean stop trusted: %v", got)
					}
					if err := d.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
		}
	}
}

// fillCleanly appends 1 KiB records until the log holds about bytes of
// them, in the active segment, and closes it cleanly.
func fillCleanly(b testing.TB, root string, opts Options, bytes int64) {
	b.Helper()
	d, err := Open(vfs.OS{}, root, opts)
	if err != nil {
		b.Fatal(err)
	}
	l, err := d.OpenLog(defaultLog)
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 1024)
	bodies, crcs := make([][]byte, 256), make([]uint32, 256)
	for i := range bodies {
		bodies[i], crcs[i] = payload, record.Checksum(payload)
	}
	for written := int64(0); written < bytes; written += 256 * int64(record.FrameSize(len(payload))) {
		ticket, err := l.AppendBatch(context.Background(), bodies, crcs)
		if err != nil {
			b.Fatal(err)
		}
		if err := ticket.Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
}
