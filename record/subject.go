package record

// Subject returns the subject of an encoded body, aliasing b, without
// parsing the rest: a filtered reader asks it of every record it passes,
// so it checks only what it must to slice safely (the fixed prefix, and
// that the field lengths add up to the body), never allocates, and leaves
// headers and the payload unread. ok is false when b is not a body this
// body version can read.
func Subject(b []byte) (subject []byte, ok bool) {
	if len(b) < BodyFixedSize || b[0] == 0 || b[0] > BodyVersion {
		return nil, false
	}
	at := uint64(BodyFixedSize)
	if le.Uint16(b[2:4])&bodyFlagProducer != 0 {
		at += BodyProducerSize
	}
	keyLen := uint64(le.Uint16(b[4:6]))
	subjectLen := uint64(le.Uint16(b[6:8]))
	rest := uint64(le.Uint32(b[8:12])) + uint64(le.Uint32(b[12:16]))
	if at+keyLen+subjectLen+rest != uint64(len(b)) {
		return nil, false
	}
	at += keyLen
	return b[at : at+subjectLen : at+subjectLen], true
}
