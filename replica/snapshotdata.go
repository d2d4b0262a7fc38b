package replica

import (
	"encoding/binary"
	"fmt"
)

// A snapshot's Data on the wire: the data offset that follows the
// snapshot point and the application's state.
//
//	[0]     version (1)
//	[1:9]   next offset
//	[9:]    application state
const snapshotDataVersion = 1

func encodeSnapshotData(s Snapshot) []byte {
	out := make([]byte, 9, 9+len(s.Data))
	out[0] = snapshotDataVersion
	binary.LittleEndian.PutUint64(out[1:9], s.NextOffset)
	return append(out, s.Data...)
}

func decodeSnapshotData(data []byte) (nextOffset uint64, state []byte, err error) {
	if len(data) < 9 {
		return 0, nil, fmt.Errorf("%w: snapshot data of %d bytes", ErrBadMessage, len(data))
	}
	if data[0] != snapshotDataVersion {
		return 0, nil, fmt.Errorf("%w: snapshot data version %d", ErrBadMessage, data[0])
	}
	return binary.LittleEndian.Uint64(data[1:9]), data[9:], nil
}
