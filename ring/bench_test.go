package ring_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ironbus/ironbus/ring"
)

// Every benchmark reports ns/op for one value moved, a push and its pop.
// "uncontended" pushes and pops on the benchmark goroutine; the other
// shapes push from producer goroutines and pop on the benchmark goroutine,
// so ns/op is the hand-off throughput. The baseline is a buffered channel
// of the same capacity in the same shape. Note the difference in waiting:
// channel ends park, ring ends poll with runtime.Gosched (an event loop
// would poll, then sleep on its wakeup).

const benchmarkCapacity = 1024

// benchmarkBatch is the consumer's PopBatch size in the "ring-batch" shapes.
const benchmarkBatch = 64

// sink keeps the compiler from discarding popped values.
var sink atomic.Int64

func BenchmarkSPSC(b *testing.B) {
	b.Run("uncontended/ring", func(b *testing.B) {
		queue := ring.NewSPSC[int](benchmarkCapacity)
		benchmarkUncontended(b, queue.TryPush, queue.TryPop)
	})
	b.Run("uncontended/channel", benchmarkUncontendedChannel)
	b.Run("handoff/ring", func(b *testing.B) { benchmarkSPSCHandoff(b, false) })
	b.Run("handoff/ring-batch", func(b *testing.B) { benchmarkSPSCHandoff(b, true) })
	b.Run("handoff/channel", func(b *testing.B) { benchmarkChannelHandoff(b, 1) })
}

func BenchmarkMPSC(b *testing.B) {
	b.Run("uncontended/ring", func(b *testing.B) {
		queue := ring.NewMPSC[int](benchmarkCapacity)
		benchmarkUncontended(b, queue.TryPush, queue.TryPop)
	})
	b.Run("uncontended/channel", benchmarkUncontendedChannel)
	for _, producers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("producers=%d/ring", producers), func(b *testing.B) {
			benchmarkMPSCHandoff(b, producers, false)
		})
		b.Run(fmt.Sprintf("producers=%d/ring-batch", producers), func(b *testing.B) {
			benchmarkMPSCHandoff(b, producers, true)
		})
		b.Run(fmt.Sprintf("producers=%d/channel", producers), func(b *testing.B) {
			benchmarkChannelHandoff(b, producers)
		})
	}
}

func benchmarkUncontended(b *testing.B, push func(int) bool, pop func() (int, bool)) {
	b.ReportAllocs()
	total := 0
	for b.Loop() {
		push(1)
		value, _ := pop()
		total += value
	}
	sink.Add(int64(total))
}

func benchmarkUncontendedChannel(b *testing.B) {
	channel := make(chan int, benchmarkCapacity)
	b.ReportAllocs()
	total := 0
	for b.Loop() {
		channel <- 1
		total += <-channel
	}
	sink.Add(int64(total))
}

// startProducers runs producers goroutines calling push with increasing
// values until stop is set; push must not block once stop is set.
func startProducers(producers int, push func(int), stop *atomic.Bool) *sync.WaitGroup {
	var group sync.WaitGroup
	for range producers {
		group.Go(func() {
			for value := 0; !stop.Load(); value++ {
				push(value)
			}
		})
	}
	return &group
}

// tryPushOrYield adapts a ring's TryPush for startProducers: on a full ring
// it yields and gives up the value, so a producer rechecks stop.
func tryPushOrYield(tryPush func(int) bool) func(int) {
	return func(value int) {
		if !tryPush(value) {
			runtime.Gosched()
		}
	}
}

func benchmarkSPSCHandoff(b *testing.B, batch bool) {
	queue := ring.NewSPSC[int](benchmarkCapacity)
	var stop atomic.Bool
	producers := startProducers(1, tryPushOrYield(queue.TryPush), &stop)
	if batch {
		consumeBatches(b, queue.PopBatch)
	} else {
		consumeOneByOne(b, queue.TryPop)
	}
	stop.Store(true)
	producers.Wait()
}

func benchmarkMPSCHandoff(b *testing.B, producerCount int, batch bool) {
	queue := ring.NewMPSC[int](benchmarkCapacity)
	var stop atomic.Bool
	producers := startProducers(producerCount, tryPushOrYield(queue.TryPush), &stop)
	if batch {
		consumeBatches(b, queue.PopBatch)
	} else {
		consumeOneByOne(b, queue.TryPop)
	}
	stop.Store(true)
	producers.Wait()
}

// consumeOneByOne pops one value per benchmark iteration, yielding while
// the ring is empty.
func consumeOneByOne(b *testing.B, pop func() (int, bool)) {
	b.ReportAllocs()
	total := 0
	for b.Loop() {
		for {
			if value, ok := pop(); ok {
				total += value
				break
			}
			runtime.Gosched()
		}
	}
	sink.Add(int64(total))
}

// consumeBatches takes one value per benchmark iteration from a local
// buffer, refilling it with PopBatch, so ns/op stays per value.
func consumeBatches(b *testing.B, popBatch func([]int) []int) {
	b.ReportAllocs()
	buffer := make([]int, 0, benchmarkBatch)
	next, total := 0, 0
	for b.Loop() {
		for next == len(buffer) {
			buffer, next = popBatch(buffer[:0]), 0
			if len(buffer) == 0 {
				runtime.Gosched()
			}
		}
		total += buffer[next]
		next++
	}
	sink.Add(int64(total))
}

func benchmarkChannelHandoff(b *testing.B, producerCount int) {
	channel := make(chan int, benchmarkCapacity)
	var stop atomic.Bool
	producers := startProducers(producerCount, func(value int) { channel <- value }, &stop)
	b.ReportAllocs()
	total := 0
	for b.Loop() {
		total += <-channel
	}
	sink.Add(int64(total))
	stop.Store(true)
	// Producers may be parked on a full channel: drain until they exit.
	finished := make(chan struct{})
	go func() {
		producers.Wait()
		close(finished)
	}()
	for {
		select {
		case <-channel:
		case <-finished:
			return
		}
	}
}

// parkingConsumer is the shape the broker uses: the consumer drains a batch
// at a time and, when the ring is empty, parks on a channel; a producer
// that pushes while the consumer is parked (or about to park) sends the one
// wake. Unlike the spinning shapes above, an idle end costs no CPU, so this
// is the like-for-like comparison with a channel.
type parkingConsumer struct {
	parked atomic.Bool
	wake   chan struct{}
}

func (p *parkingConsumer) notify() {
	if p.parked.Load() && p.parked.CompareAndSwap(true, false) {
		p.wake <- struct{}{}
	}
}

// pushOrPark pushes value, and while the ring is full yields (the broker's
// producers hold credits, so they never find the ring full).
func (p *parkingConsumer) push(tryPush func(int) bool) func(int) {
	return func(value int) {
		for !tryPush(value) {
			runtime.Gosched()
		}
		p.notify()
	}
}

// consume takes one value per iteration from batches, parking when empty.
func (p *parkingConsumer) consume(b *testing.B, popBatch func([]int) []int, stop *atomic.Bool) {
	b.ReportAllocs()
	buffer := make([]int, 0, benchmarkBatch)
	next, total := 0, 0
	for b.Loop() {
		for next == len(buffer) {
			buffer, next = popBatch(buffer[:0]), 0
			if len(buffer) > 0 {
				break
			}
			p.parked.Store(true)
			// Recheck after announcing: a push that missed the flag
			// is seen here, one that saw it sends the wake.
			if buffer = popBatch(buffer[:0]); len(buffer) > 0 {
				if !p.parked.CompareAndSwap(true, false) {
					<-p.wake // a producer already committed to waking us
				}
				break
			}
			<-p.wake
		}
		total += buffer[next]
		next++
	}
	sink.Add(int64(total))
	stop.Store(true)
}

func BenchmarkParkingHandoff(b *testing.B) {
	for _, producers := range []int{1, 2} {
		b.Run(fmt.Sprintf("producers=%d/ring", producers), func(b *testing.B) {
			var stop atomic.Bool
			parking := &parkingConsumer{wake: make(chan struct{}, 1)}
			var group *sync.WaitGroup
			if producers == 1 {
				queue := ring.NewSPSC[int](benchmarkCapacity)
				group = startProducers(1, parking.push(queue.TryPush), &stop)
				parking.consume(b, queue.PopBatch, &stop)
				for len(queue.PopBatch(make([]int, 0, benchmarkCapacity))) > 0 {
				}
			} else {
				queue := ring.NewMPSC[int](benchmarkCapacity)
				group = startProducers(producers, parking.push(queue.TryPush), &stop)
				parking.consume(b, queue.PopBatch, &stop)
				for len(queue.PopBatch(make([]int, 0, benchmarkCapacity))) > 0 {
				}
			}
			group.Wait()
		})
		b.Run(fmt.Sprintf("producers=%d/channel", producers), func(b *testing.B) {
			benchmarkChannelHandoff(b, producers)
		})
	}
}
