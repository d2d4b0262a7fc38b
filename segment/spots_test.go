package segment

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// span is a reader's output reduced to what the tail test compares: a
// record (one offset) or a gap.
type span struct {
	From, To uint64
	Gap      bool
	Reason   string
}

// coalesce merges filtered gaps side by side: a tailing reader reports a
// stretch up to the committed end, and the stretch after it separately.
func coalesce(spans []span) []span {
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && s.Gap && s.Reason == GapFiltered && out[n-1].Gap && out[n-1].Reason == GapFiltered && out[n-1].To == s.From {
			out[n-1].To = s.To
			continue
		}
		out = append(out, s)
	}
	return out
}

func spansOf(items []readItem) []span {
	spans := make([]span, 0, len(items))
	for _, item := range items {
		if item.Gap != nil {
			spans = append(spans, span{From: item.Gap.From, To: item.Gap.To, Gap: true, Reason: item.Gap.Reason})
			continue
		}
		spans = append(spans, span{From: item.Offset, To: item.Offset + 1})
	}
	return spans
}

// TestFilteredTailWhileAppending follows the active segment with a filter
// while an appender writes rare subjects interleaved with a dense one:
// blocks finish, their spots appear and the committed mark moves under
// the reader. Once the appender stops, what the reader returned (filtered
// gaps side by side merged) is what a filtered read of the whole log must
// be.
func TestFilteredTailWhileAppending(t *testing.T) {
	for _, api := range []string{"Next", "NextRun"} {
		t.Run(api, func(t *testing.T) {
			opts := testOptions(11)
			opts.SegmentSize = 1 << 20
			d := openDir(t, vfs.NewMemFS(), opts)
			defer d.Close()
			l := openLog(t, d)
			m := subjectSet{"rare.0": true}
			const records = 30000
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := newRand(7)
				var last Ticket
				for written := uint64(0); written < records; {
					batch := 1 + rng.IntN(40)
					bodies, crcs := make([][]byte, batch), make([]uint32, batch)
					for i := range bodies {
						subject := "dense"
						if rng.IntN(60) == 0 {
							subject = fmt.Sprint("rare.", rng.IntN(2))
						}
						bodies[i] = subjectBody(written, subject, 100+rng.IntN(200), false)
						crcs[i] = crc(bodies[i])
						written++
					}
					ticket, err := l.AppendBatch(context.Background(), bodies, crcs)
					if err != nil {
						t.Errorf("append: %v", err)
						return
					}
					last = ticket
					if rng.IntN(20) == 0 {
						time.Sleep(time.Millisecond)
					}
				}
				if err := last.Wait(context.Background()); err != nil {
					t.Errorf("wait: %v", err)
				}
			}()
			got := tailFiltered(t, l, m, api, records)
			wg.Wait()
			want := spansOf(filterReference(readEntries(t, l, nil), m))
			got = coalesce(got)
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("item %d is %+v, want %+v", i, got[i], want[i])
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d items, want %d", len(got), len(want))
			}
		})
	}
}

// tailFiltered reads with m until the reader reaches offset end, waiting
// for commits at the committed end.
func tailFiltered(t *testing.T, l *Log, m Matcher, api string, end uint64) []span {
	t.Helper()
	r := l.NewReader(0)
	defer r.Close()
	r.SetFilter(m)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var spans []span
	for r.Offset() < end {
		from, to, isGap, err := readOne(r, api)
		if err != nil {
			if _, err := l.WaitCommitted(ctx, r.Offset()); err != nil && r.Offset() < end {
				t.Fatalf("waiting at %d: %v", r.Offset(), err)
			}
			continue
		}
		if isGap {
			spans = append(spans, span{From: from, To: to, Gap: true, Reason: GapFiltered})
			continue
		}
		for offset := from; offset < to; offset++ {
			spans = append(spans, span{From: offset, To: offset + 1})
		}
	}
	return spans
}

// TestSpotsBounded: however the subjects fall, a segment's spots stay
// within spotMaxPerSegment and a block lists at most spotMaxPerBlock.
func TestSpotsBounded(t *testing.T) {
	var b spotBuilder
	rng := newRand(5)
	pos := int64(0)
	for block := 0; block < 4096; block++ {
		for i := range 200 {
			id := 0
			if rng.IntN(15) == 0 {
				id = 1 + rng.IntN(30)
			}
			b.add(id, pos, i == 0)
			pos += 300
		}
	}
	b.finish()
	if len(b.spots) > spotMaxPerSegment || len(b.ends) != 4096 {
		t.Fatalf("%d spots, %d blocks", len(b.spots), len(b.ends))
	}
	for i := range b.ends {
		if n := len(b.of(i)); n > spotMaxPerBlock {
			t.Fatalf("block %d lists %d spots", i, n)
		}
	}
}
