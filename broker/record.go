package broker

import (
	"fmt"

	"github.com/ironbus/ironbus/record"
)

// CheckRecord validates a record body before it is appended and returns
// its decoded view (which aliases body): its size against the largest
// record, its CRC32C against crc, its encoding, and that some consumer
// can read it. Allocation-free when the record is valid.
func (b *Broker) CheckRecord(body []byte, crc uint32) (record.View, error) {
	max := b.cfg.Storage.MaxRecordBytes
	if max > 0 && len(body) > int(max) {
		return record.View{}, fmt.Errorf("%w: record body of %d bytes, maximum %d", ErrRecordTooLarge, len(body), max)
	}
	if sum := record.Checksum(body); sum != crc {
		return record.View{}, fmt.Errorf("%w: record body CRC32C is %08x, the frame says %08x: damaged in transit", ErrChecksum, sum, crc)
	}
	view, err := record.Parse(body)
	if err != nil {
		return record.View{}, fmt.Errorf("%w: record body: %w", ErrInvalidRecord, err)
	}
	// The broker never decompresses (consumers do, after their CRC
	// check), but it refuses what no consumer could read: a codec no
	// IronBus knows, or a payload declaring more raw bytes than a record
	// may hold, which every consumer's default cap would refuse.
	if !view.Codec.Known() {
		return view, fmt.Errorf("%w: record body: payload codec %d is unknown (0 none, 1 lz4, 2 zstd)", ErrInvalidRecord, uint8(view.Codec))
	}
	if max > 0 && view.Codec != record.CodecNone && int64(view.RawLength) > int64(max) {
		return view, fmt.Errorf("%w: record payload of %d bytes decompressed, maximum %d", ErrRecordTooLarge, view.RawLength, max)
	}
	return view, nil
}
