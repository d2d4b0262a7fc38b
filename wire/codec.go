package wire

import (
	"fmt"
	"math"
)

// reader walks a body with bounds checks; the first failure sticks, so a
// decoder reads every field and checks err once.
type reader struct {
	buf  []byte
	what string
	err  error
}

func (r *reader) fail(field string, need int) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: %s needs %d bytes, %d left", ErrMalformed, r.what, field, need, len(r.buf))
	}
	r.buf = nil
}

func (r *reader) u8(field string) uint8 {
	if len(r.buf) < 1 {
		r.fail(field, 1)
		return 0
	}
	v := r.buf[0]
	r.buf = r.buf[1:]
	return v
}

func (r *reader) u16(field string) uint16 {
	if len(r.buf) < 2 {
		r.fail(field, 2)
		return 0
	}
	v := le.Uint16(r.buf)
	r.buf = r.buf[2:]
	return v
}

func (r *reader) u32(field string) uint32 {
	if len(r.buf) < 4 {
		r.fail(field, 4)
		return 0
	}
	v := le.Uint32(r.buf)
	r.buf = r.buf[4:]
	return v
}

func (r *reader) u64(field string) uint64 {
	if len(r.buf) < 8 {
		r.fail(field, 8)
		return 0
	}
	v := le.Uint64(r.buf)
	r.buf = r.buf[8:]
	return v
}

// bytes16 reads a u16-length-prefixed field; the result aliases the body.
// The length is read inline: naming it by concatenation would allocate on
// every call, failing or not.
func (r *reader) bytes16(field string) []byte {
	if len(r.buf) < 2 {
		r.fail(field, 2)
		return nil
	}
	n := int(le.Uint16(r.buf))
	r.buf = r.buf[2:]
	if len(r.buf) < n {
		r.fail(field, n)
		return nil
	}
	v := r.buf[:n:n]
	r.buf = r.buf[n:]
	return v
}

// optionalBytes16 reads a trailing u16-length-prefixed field that older
// peers do not send: no bytes left means absent. A present field of zero
// length is malformed: an empty value is sent by leaving the field out,
// so every message has exactly one encoding.
func (r *reader) optionalBytes16(field string) []byte {
	if r.err != nil || len(r.buf) == 0 {
		return nil
	}
	v := r.bytes16(field)
	if r.err == nil && len(v) == 0 {
		r.err = fmt.Errorf("%w: %s: %s is present but empty (leave it out instead)", ErrMalformed, r.what, field)
	}
	return v
}

// rest returns the remaining bytes (the last field of a body).
func (r *reader) rest() []byte {
	v := r.buf
	r.buf = nil
	return v
}

// done fails when bytes are left over: a body longer than its fields is as
// wrong as a shorter one, and accepting it would hide a framing bug.
func (r *reader) done() error {
	if r.err == nil && len(r.buf) != 0 {
		r.err = fmt.Errorf("%w: %s: %d unexpected trailing bytes", ErrMalformed, r.what, len(r.buf))
	}
	return r.err
}

func appendBytes16(dst, b []byte) []byte {
	if len(b) > math.MaxUint16 {
		b = b[:math.MaxUint16] // callers validate lengths; never emit a lying prefix
	}
	dst = le.AppendUint16(dst, uint16(len(b)))
	return append(dst, b...)
}

func appendString16(dst []byte, s string) []byte {
	if len(s) > math.MaxUint16 {
		s = s[:math.MaxUint16]
	}
	dst = le.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}
