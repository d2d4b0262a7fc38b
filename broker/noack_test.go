package broker

import "testing"

// TestShedBudget: no-ack records are shed only within the per-second
// budget, every shed record is counted, and a zero budget never sheds.
func TestShedBudget(t *testing.T) {
	b := &Broker{cfg: Config{NoAckShedPerSecond: 100}}
	if !b.TryShed(60) || !b.TryShed(40) {
		t.Fatal("a full second of budget must be granted")
	}
	if b.TryShed(50) {
		t.Fatal("shedding past the budget must be refused (the records wait instead)")
	}
	b.CountSilentRefusal()
	if refused, shed := b.NoAckDropped(); refused != 1 || shed != 100 {
		t.Fatalf("counted %d refused, %d shed; want 1 and 100", refused, shed)
	}
	never := &Broker{}
	if never.TryShed(1) {
		t.Fatal("a zero budget never sheds")
	}
}
