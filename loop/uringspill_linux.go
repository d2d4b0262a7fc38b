package loop

// spillBuffer holds received bytes a session could not take yet, in
// arrival order: what the kernel had already received for a connection
// when its session paused. The RECV is cancelled on the next enter, so this
// is at most about one pass's worth of provided buffers. It is a list of
// chunks from the reactor's spillPool rather than one growing slice, so a
// burst is copied once, never again as the slice grows, and a session that
// pauses often reuses the same chunks.
type spillBuffer struct {
	chunks [][]byte
	start  int // bytes of chunks[0] already delivered
}

func (s *spillBuffer) empty() bool { return len(s.chunks) == 0 }

// pending is the undelivered part of the first chunk.
func (s *spillBuffer) pending() []byte { return s.chunks[0][s.start:] }

// add copies b in, filling the last chunk before taking another.
func (s *spillBuffer) add(b []byte, pool *spillPool) {
	for len(b) > 0 {
		last := len(s.chunks) - 1
		if last < 0 || len(s.chunks[last]) == cap(s.chunks[last]) {
			s.chunks = append(s.chunks, pool.get())
			last++
		}
		chunk := s.chunks[last]
		n := min(len(b), cap(chunk)-len(chunk))
		s.chunks[last] = append(chunk, b[:n]...)
		b = b[n:]
	}
}

// consume marks n bytes of pending delivered, handing an emptied chunk
// back to the pool.
func (s *spillBuffer) consume(n int, pool *spillPool) {
	s.start += n
	if s.start < len(s.chunks[0]) {
		return
	}
	pool.put(s.chunks[0])
	s.chunks[0] = nil
	s.chunks, s.start = s.chunks[1:], 0
	if len(s.chunks) == 0 {
		s.chunks = nil
	}
}

// release drops every byte: reading is over.
func (s *spillBuffer) release(pool *spillPool) {
	for _, chunk := range s.chunks {
		pool.put(chunk)
	}
	*s = spillBuffer{}
}

// spillPool recycles spill chunks of one size within a reactor, keeping
// at most keep of them.
type spillPool struct {
	size int
	keep int
	free [][]byte
}

func (p *spillPool) get() []byte {
	if n := len(p.free); n > 0 {
		chunk := p.free[n-1]
		p.free = p.free[:n-1]
		return chunk[:0]
	}
	return make([]byte, 0, p.size)
}

func (p *spillPool) put(chunk []byte) {
	if len(p.free) < p.keep && cap(chunk) == p.size {
		p.free = append(p.free, chunk[:0])
	}
}
