package broker

import "github.com/ironbus/ironbus/producer"

// ProducerPosition is where a producer's sequence stands on one partition.
type ProducerPosition struct {
	Stream       string
	Partition    uint32
	NextSequence uint64
}

// InitProducer returns the id of the named producer and a new epoch.
func (b *Broker) InitProducer(name string) (producer.Identity, []ProducerPosition, error) {
	return producer.Identity{}, nil, nil
}

// ProducerEpoch returns the current epoch of producer id; false when the
// broker never issued it.
func (b *Broker) ProducerEpoch(id uint64) (uint32, bool) { return 0, false }
