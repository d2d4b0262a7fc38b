package record

import "fmt"

// Codec names the compression of a record payload. The producer compresses;
// the broker stores the bytes as sent and consumers decompress.
type Codec uint8

// Payload codecs.
const (
	CodecNone Codec = 0
	CodecLZ4  Codec = 1 // lz4 block format
	CodecZstd Codec = 2
)

// Known reports whether c is a codec this body version defines. Bodies
// parse whatever their codec byte; what to do with an unknown one is the
// reader's choice (the broker refuses it, a consumer reports it).
func (c Codec) Known() bool { return c <= CodecZstd }

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}
