package broker

import (
	"time"

	"github.com/ironbus/ironbus/brokertime"
)

// openClock opens broker time over the data directory, whose lock the
// broker holds by now, so two brokers never write one floor.
func (b *Broker) openClock() error {
	clock, err := brokertime.Open(b.cfg.FS, b.dir.Path(), brokertime.Options{Source: b.cfg.TimeSource, Logger: b.cfg.Logger,
		ReadOnly: b.cfg.Storage.ReadOnly})
	if err != nil {
		return err
	}
	b.clock = clock
	return nil
}

// Now is broker time: it only moves forward, across restarts too, and
// never reads the wall clock (package brokertime). Message-id windows
// expire on it.
func (b *Broker) Now() time.Duration { return b.clock.Now() }

// Clock is the broker's clock, for the adapters and features that time
// what they keep.
func (b *Broker) Clock() *brokertime.Clock { return b.clock }
