package broker

// subjectLast is the last offset of a record with subject in the
// partition (NoOffset: none).
func (p *Partition) subjectLast(subject []byte) (uint64, error) { return NoOffset, nil }

// subjectPut notes that the record at offset has subject.
func (p *Partition) subjectPut(subject []byte, offset uint64) {}

// TracksSubjects reports whether every record appended to the partition
// must go through the checked path, to keep its subject index current.
func (p *Partition) TracksSubjects() bool { return false }
