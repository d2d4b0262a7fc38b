package loop

import "github.com/ironbus/ironbus/arena"

// outputChunk is one piece of queued output: filled bytes of bytes.
type outputChunk struct {
	bytes  []byte
	filled int
	buffer arena.Buffer // the slab buffer bytes is; zero for a heap chunk
}

// chunkSource hands out output chunks from Config.OutputBuffers, a slab
// the RAM budget counts, and takes them back once their bytes are sent.
// Without a slab (tests), or when it is exhausted (the per-connection
// limits make that a bug in the sizing), chunks come from the heap.
type chunkSource struct {
	slab *arena.Slab
}

func (s chunkSource) get() outputChunk {
	if s.slab != nil {
		if buffer, ok := s.slab.Get(); ok {
			return outputChunk{bytes: buffer.Bytes(), buffer: buffer}
		}
	}
	return outputChunk{bytes: make([]byte, OutputChunkSize)}
}

// put returns chunks to the slab and clears them, so no slice of a
// released buffer lingers in the caller's array.
func (s chunkSource) put(chunks []outputChunk) {
	for i := range chunks {
		if chunks[i].buffer != (arena.Buffer{}) {
			_ = chunks[i].buffer.Release()
		}
		chunks[i] = outputChunk{}
	}
}

// copiedRange calls add with the bytes of chunks between positions from
// and to of their concatenation, in order, until add returns false.
func copiedRange(chunks []outputChunk, from, to int, add func([]byte) bool) bool {
	position := 0
	for i := range chunks {
		chunk := &chunks[i]
		start, end := position, position+chunk.filled
		position = end
		if end <= from {
			continue
		}
		if start >= to {
			break
		}
		if !add(chunk.bytes[max(from, start)-start : min(to, end)-start]) {
			return false
		}
	}
	return true
}

// filledBytes is the copied bytes chunks hold.
func filledBytes(chunks []outputChunk) int {
	total := 0
	for i := range chunks {
		total += chunks[i].filled
	}
	return total
}
