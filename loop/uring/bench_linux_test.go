package uring

import "testing"

// BenchmarkNopSingle is one io_uring_enter per NOP: the fixed cost of a
// round trip through the ring.
func BenchmarkNopSingle(b *testing.B) {
	r := newTestRing(b, 64, Options{})
	for b.Loop() {
		r.GetSQE().PrepNop()
		if _, err := r.SubmitAndWait(1); err != nil {
			b.Fatal(err)
		}
		r.SeenCQE()
	}
}

// BenchmarkNopBatch32 submits and reaps 32 NOPs per enter. One op is one
// NOP, so ns/op compares directly with BenchmarkNopSingle.
func BenchmarkNopBatch32(b *testing.B) {
	r := newTestRing(b, 64, Options{})
	reap := func(CQE) bool { return true }
	b.ResetTimer()
	for done := 0; done < b.N; done += 32 {
		for range 32 {
			r.GetSQE().PrepNop()
		}
		if _, err := r.SubmitAndWait(32); err != nil {
			b.Fatal(err)
		}
		r.ForEachCQE(reap)
	}
}

// BenchmarkNopSingleIssuerDeferTaskrun is BenchmarkNopSingle on a
// SINGLE_ISSUER|DEFER_TASKRUN ring, which the benchmark goroutine owns.
func BenchmarkNopSingleIssuerDeferTaskrun(b *testing.B) {
	requireUring(b)
	if !detected().DeferTaskrun {
		b.Skip("no DEFER_TASKRUN")
	}
	lockThread(b)
	r := newTestRing(b, 64, Options{DeferTaskrun: true})
	for b.Loop() {
		r.GetSQE().PrepNop()
		if _, err := r.SubmitAndWait(1); err != nil {
			b.Fatal(err)
		}
		r.SeenCQE()
	}
}
