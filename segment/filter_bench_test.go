package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"unsafe"

	"github.com/ironbus/ironbus/segment/vfs"
)

// Traversal benchmark: a log of traversalRecords records with 256-byte
// payloads and subjects s.0..s.99, either interleaved (record i has
// subject i%100) or clustered (runs of traversalRun records of one
// subject), or rare (the sparse case: record i has subject s.42
// when i%100 == 42 and s.0 otherwise), read from start to end with Next and with NextRun, without a
// filter and with a filter matching one subject in 100. records/s counts
// the log's records traversed (delivered or skipped); MB/s the log's
// frame bytes. Run with:
//
//	go test -run='^$' -bench='^BenchmarkTraversal$' -count=5 ./segment
const (
	traversalRecords  = 1_000_000
	traversalSubjects = 100
	traversalRun      = 1000
	traversalPayload  = 256
)

func BenchmarkTraversal(b *testing.B) {
	for _, layout := range []string{"interleaved", "clustered", "rare"} {
		l, size := buildTraversalLog(b, layout)
		summaryBytes, indexBytes := summaryMemory(l)
		for _, filter := range []struct {
			name string
			m    Matcher
		}{{"unfiltered", nil}, {"1in100", subjectSet{"s.42": true}}} {
			for _, api := range []string{"Next", "NextRun"} {
				b.Run(layout+"/"+filter.name+"/"+api, func(b *testing.B) {
					b.SetBytes(size)
					b.ReportAllocs()
					delivered := 0
					for b.Loop() {
						delivered = traverse(b, l, filter.m, api)
					}
					want := traversalRecords
					if filter.m != nil {
						want = traversalRecords / traversalSubjects
					}
					if delivered != want {
						b.Fatalf("delivered %d records, want %d", delivered, want)
					}
					b.ReportMetric(float64(traversalRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
					b.ReportMetric(summaryBytes, "summary-B/seg")
					b.ReportMetric(indexBytes, "index-B/seg")
				})
			}
		}
		_ = l.dir.Close()
	}
}

// buildTraversalLog writes the benchmark's log on the real file system
// (sealed segments are mapped, as in production) and returns it with its
// size in bytes.
func buildTraversalLog(b *testing.B, layout string) (*Log, int64) {
	b.Helper()
	opts := testOptions(1)
	opts.SegmentSize = DefaultSegmentSize
	opts.StagingBytes = DefaultStagingBytes
	opts.Durability, opts.AcceptRelaxedDurability = DurabilityNone, true
	d, err := Open(vfs.OS{}, b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	l, err := d.OpenLog(defaultLog)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 256
	bodies, crcs := make([][]byte, batch), make([]uint32, batch)
	var last Ticket
	for first := 0; first < traversalRecords; first += batch {
		n := min(batch, traversalRecords-first)
		bodies, crcs := bodies[:n], crcs[:n]
		for i := range bodies {
			index := first + i
			subject := index % traversalSubjects
			switch {
			case layout == "clustered":
				subject = index / traversalRun % traversalSubjects
			case layout == "rare" && subject != 42:
				subject = 0
			}
			bodies[i] = subjectBody(uint64(index), fmt.Sprint("s.", subject), traversalPayload, false)
			crcs[i] = crc(bodies[i])
		}
		if last, err = l.AppendBatch(context.Background(), bodies, crcs); err != nil {
			b.Fatal(err)
		}
	}
	if err := last.Wait(context.Background()); err != nil {
		b.Fatal(err)
	}
	// The first read of a sealed segment maps and validates it: done once
	// here, so the benchmark times traversals only.
	traverse(b, l, nil, "NextRun")
	var size int64
	for _, seg := range l.segments.Load().segments {
		size += seg.stats().Bytes
	}
	return l, size
}

// summaryMemory returns the mean bytes the subject summary and the
// sparse index of a sealed segment keep.
func summaryMemory(l *Log) (summaryBytes, indexBytes float64) {
	sealed := 0
	for _, seg := range l.segments.Load().segments {
		if !seg.sealed.Load() {
			continue
		}
		seg.mu.Lock()
		summaryBytes += float64(seg.mu.summary.memoryBytes())
		indexBytes += float64(cap(seg.mu.index) * int(unsafe.Sizeof(indexEntry{})))
		seg.mu.Unlock()
		sealed++
	}
	return summaryBytes / float64(max(sealed, 1)), indexBytes / float64(max(sealed, 1))
}

// traverse reads the whole log and returns how many records it delivered.
func traverse(b *testing.B, l *Log, m Matcher, api string) int {
	r := l.NewReader(0)
	defer r.Close()
	r.SetFilter(m)
	delivered := 0
	for {
		if api == "Next" {
			e, err := r.Next()
			if errors.Is(err, io.EOF) {
				return delivered
			}
			if err != nil {
				b.Fatal(err)
			}
			if e.Gap == nil {
				delivered++
			}
			continue
		}
		run, err := r.NextRun(1024, 1<<20)
		if errors.Is(err, io.EOF) {
			return delivered
		}
		if err != nil {
			b.Fatal(err)
		}
		delivered += run.Count
		run.Release()
	}
}

// BenchmarkSummaryMask measures what the summary adds to every record the
// appender writes (and recovery scans): reading the subject from the body
// and finding its dictionary id, with subjects changing every record
// (interleaved, the cache of the last subject never hits) or in runs.
func BenchmarkSummaryMask(b *testing.B) {
	bodies := make([][]byte, traversalSubjects*10)
	for i := range bodies {
		bodies[i] = subjectBody(uint64(i), fmt.Sprint("s.", i%traversalSubjects), traversalPayload, false)
	}
	for _, layout := range []string{"interleaved", "clustered"} {
		b.Run(layout, func(b *testing.B) {
			var dict dictBuilder
			var mask subjectMask
			i := 0
			for b.Loop() {
				body := bodies[i%len(bodies)]
				if layout == "clustered" {
					body = bodies[i/traversalRun%len(bodies)]
				}
				mask.add(dict.mask(body))
				i++
			}
		})
	}
}
