package loop

// inputBuffer holds a connection's received bytes that Data has not
// consumed yet: a partial frame, or frames a paused session left for later.
type inputBuffer struct {
	buf        []byte
	start, end int
	max        int
}

// free returns the space to read into, making room first.
func (b *inputBuffer) free() []byte {
	if b.start == b.end {
		b.start, b.end = 0, 0
	}
	if b.end == len(b.buf) && b.start > 0 {
		copy(b.buf, b.buf[b.start:b.end])
		b.end -= b.start
		b.start = 0
	}
	if b.end == len(b.buf) && len(b.buf) < b.max {
		grown := make([]byte, min(max(2*len(b.buf), 64<<10), b.max))
		copy(grown, b.buf[:b.end])
		b.buf = grown
	}
	return b.buf[b.end:]
}

func (b *inputBuffer) filled(n int) { b.end += n }

func (b *inputBuffer) pending() []byte { return b.buf[b.start:b.end] }

// deliver hands the pending bytes to the session.
func (b *inputBuffer) deliver(session Session) error {
	if b.start == b.end {
		return nil
	}
	consumed, err := session.Data(b.buf[b.start:b.end])
	b.start += consumed
	return err
}

// keep stores bytes the session left unconsumed from a buffer it does not
// own (a reactor's shared read buffer). The buffer is empty when this is
// called, so the bytes land at its start.
func (b *inputBuffer) keep(rest []byte) {
	if len(rest) == 0 {
		return
	}
	if cap(b.buf) < len(rest) {
		b.buf = make([]byte, max(len(rest), min(64<<10, b.max)))
	}
	b.buf = b.buf[:cap(b.buf)]
	b.start, b.end = 0, copy(b.buf, rest)
}
