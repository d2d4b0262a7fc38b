package consumer

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/ironbus/ironbus/internal/crashtest"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// deadLetterRig fills a rig's queue with n dead letters of its log.
func deadLetterRig(t *testing.T, fsys vfs.FS, n int) {
	r := mustRig(t, fsys)
	for i := range n {
		body, err := record.AppendBody(nil, record.Body{Key: []byte("k"), Payload: []byte(fmt.Sprint("record-", i)),
			Headers: []record.Header{{Name: "trace", Value: []byte("t")}}})
		if err != nil {
			t.Fatal(err)
		}
		letter := DeadLetter{Group: "g", Stream: "orders", Offset: uint64(i), Attempts: 5, Reason: ReasonMaxDeliver, Body: body}
		if err := r.queue.Append(context.Background(), letter); err != nil {
			t.Fatal(err)
		}
	}
	r.dir.Close()
}

func (r *rig) target(uint32) (*segment.Log, error) { return r.log, nil }

// redriven returns, for each queue offset, how many records of the log
// carry it in their redriven-from header, and checks that no dead-letter
// header came along.
func (r *rig) redriven() map[uint64]int {
	r.t.Helper()
	counts := map[uint64]int{}
	reader := r.log.NewReader(r.log.FirstOffset())
	defer reader.Close()
	for {
		entry, err := reader.Next()
		if err != nil {
			return counts
		}
		view, err := record.Parse(entry.Body)
		if err != nil {
			r.t.Fatal(err)
		}
		for name, value := range view.Headers() {
			switch {
			case string(name) == HeaderRedrivenFrom:
				offset, _ := strconv.ParseUint(string(value), 10, 64)
				counts[offset]++
			case string(name) != "trace":
				r.t.Fatalf("redriven record %d kept header %s", entry.Offset, name)
			}
		}
	}
}

func TestRedriveIsIdempotentAndBounded(t *testing.T) {
	mem := vfs.NewMemFS()
	deadLetterRig(t, mem, 5)
	r := mustRig(t, mem)
	ctx := context.Background()
	first, err := Redrive(ctx, r.dlq, r.target, 2)
	if err != nil || first.Republished != 2 || first.Mark != 2 {
		t.Fatalf("first redrive: %+v %v", first, err)
	}
	rest, err := Redrive(ctx, r.dlq, r.target, 0)
	if err != nil || rest.Republished != 3 || rest.Mark != 5 {
		t.Fatalf("second redrive: %+v %v", rest, err)
	}
	again, err := Redrive(ctx, r.dlq, r.target, 0)
	if err != nil || again.Republished != 0 || again.Mark != 5 {
		t.Fatalf("third redrive: %+v %v", again, err)
	}
	counts := r.redriven()
	for offset := range uint64(5) {
		if counts[offset] != 1 {
			t.Fatalf("dead letter %d republished %d times: %v", offset, counts[offset], counts)
		}
	}
	if mark, err := RedriveMark(r.dlq); err != nil || mark != 5 {
		t.Fatalf("mark %d %v", mark, err)
	}
}

// TestRedriveSurvivesACrashAtEveryWrite cuts the power at every mutating
// file operation of a redrive, recovers, redrives again, and checks that
// each dead letter is in the stream exactly once.
func TestRedriveSurvivesACrashAtEveryWrite(t *testing.T) {
	base := vfs.NewMemFS()
	deadLetterRig(t, base, 4)
	for k := int64(0); ; k++ {
		image := redriveUntilCrash(t, base.CrashClone(vfs.CrashOptions{}), k)
		if image == nil {
			if k < 5 {
				t.Fatalf("the redrive made only %d writes", k)
			}
			return
		}
		for _, keep := range []float64{0, 0.5} {
			r, err := openRig(t, image.CrashClone(vfs.CrashOptions{Seed: uint64(k), KeepUnsynced: keep}))
			if err != nil {
				t.Fatalf("crash at write %d: recovery: %v", k, err)
			}
			result, err := Redrive(context.Background(), r.dlq, r.target, 0)
			if err != nil || result.Mark != 4 {
				t.Fatalf("crash at write %d: redrive after recovery: %+v %v", k, result, err)
			}
			counts := r.redriven()
			for offset := range uint64(4) {
				if counts[offset] != 1 {
					t.Fatalf("crash at write %d (keep %v): dead letter %d is in the stream %d times", k, keep, offset, counts[offset])
				}
			}
			r.dir.Close()
		}
	}
}

// redriveUntilCrash redrives on mem and cuts the power at the k-th
// mutation; it returns the image taken at the cut, nil when the redrive
// finished first.
func redriveUntilCrash(t *testing.T, mem *vfs.MemFS, k int64) *vfs.MemFS {
	cut := crashtest.CutAtWrite(mem, k)
	cut.Pause() // count the redrive's writes, not recovery's
	if r, err := openRig(t, cut.FS()); err == nil {
		cut.Count()
		_, _ = Redrive(context.Background(), r.dlq, r.target, 0)
		r.dir.Close()
	}
	return cut.Image()
}
