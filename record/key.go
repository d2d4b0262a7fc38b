package record

// Key returns the key of an encoded body, aliasing b, and whether the
// body is a tombstone, without parsing the rest: compaction asks it of
// every record it passes. Like Subject it checks only what slicing needs
// and never allocates; ok is false when b is not a body this body version
// can read.
func Key(b []byte) (key []byte, tombstone, ok bool) {
	if len(b) < BodyFixedSize || b[0] == 0 || b[0] > BodyVersion {
		return nil, false, false
	}
	flags := le.Uint16(b[2:4])
	at := uint64(BodyFixedSize)
	if flags&bodyFlagProducer != 0 {
		at += BodyProducerSize
	}
	keyLen := uint64(le.Uint16(b[4:6]))
	rest := uint64(le.Uint16(b[6:8])) + uint64(le.Uint32(b[8:12])) + uint64(le.Uint32(b[12:16]))
	if at+keyLen+rest != uint64(len(b)) {
		return nil, false, false
	}
	return b[at : at+keyLen : at+keyLen], flags&bodyFlagTombstone != 0, true
}
