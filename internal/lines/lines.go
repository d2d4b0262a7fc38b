package lines

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// ErrTooLong refuses a line longer than the reader's limit.
var ErrTooLong = errors.New("lines: line too long")

// bufferSize is the read buffer; a longer line is gathered in pieces.
const bufferSize = 64 << 10

// Reader yields the lines of a stream, each at most limit bytes.
type Reader struct {
	in    *bufio.Reader
	limit int
	line  []byte
}

// NewReader reads lines of at most limit bytes from in.
func NewReader(in io.Reader, limit int) *Reader {
	return &Reader{in: bufio.NewReaderSize(in, bufferSize), limit: limit}
}

// Next returns the next line, valid until the following call; io.EOF
// once the input is done, ErrTooLong as soon as the line passes the
// limit.
func (r *Reader) Next() ([]byte, error) {
	line := r.line[:0]
	defer func() { r.line = line[:0] }()
	for {
		chunk, err := r.in.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > r.limit+2 { // room for "\r\n"
			return nil, ErrTooLong
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			err = nil
		case err != nil:
			return nil, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > r.limit {
			return nil, ErrTooLong
		}
		return line, nil
	}
}
