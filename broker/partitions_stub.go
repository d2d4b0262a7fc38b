package broker

import "github.com/ironbus/ironbus/wire"

// partitionCount is a stand-in until multi-partition streams land
// (feat/streams defines the real one): every stream has one partition.
// It checks the stream exists (creating it like logFor does) so a
// PartitionAll consume fails the same way a partition-0 one would.
func (b *Broker) partitionCount(stream []byte) (uint32, *wire.Error) {
	if _, werr := b.logFor(stream, 0); werr != nil {
		return 0, werr
	}
	return 1, nil
}
