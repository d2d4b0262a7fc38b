package broker

import (
	"context"
	"testing"
	"time"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/format"
)

// TestDeadLetterRetentionDropsOldSegments: a queue's sealed segments whose
// records are all older than the retention go; the newest segment stays.
func TestDeadLetterRetentionDropsOldSegments(t *testing.T) {
	_, b := testBroker(t, Config{DeadLetterRetention: time.Minute,
		Storage: segment.Options{SegmentSize: segment.MinSegmentSize}})
	queue, err := b.deadLetterLog("jobs")
	if err != nil {
		t.Fatal(err)
	}
	body, err := format.AppendBody(nil, format.Body{Payload: make([]byte, 4<<10)})
	if err != nil {
		t.Fatal(err)
	}
	var last segment.Ticket
	for range 60 { // about four 64 KiB segments
		if last, err = queue.Append(context.Background(), body, format.CRC(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := last.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.retainDeadLetters(time.Now()) // nothing is a minute old yet
	if first := queue.FirstOffset(); first != 0 {
		t.Fatalf("fresh dead letters were dropped: the queue starts at %d", first)
	}
	b.retainDeadLetters(time.Now().Add(time.Hour))
	first, end := queue.FirstOffset(), queue.Committed()
	if first == 0 || first >= end {
		t.Fatalf("after an hour the queue holds %d..%d: want the old sealed segments gone and the newest kept", first, end)
	}
}
