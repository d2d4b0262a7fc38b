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
