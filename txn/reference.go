package txn

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/ironbus/ironbus/record"
)

// ReferenceHeader is the record header a committed transactional record
// carries in its target partition: "<transaction id>:<index>" in decimal,
// the index being the record's place in its transaction. Recovery finds
// the copies a commit already made by it, and consumers may read it.
const ReferenceHeader = "ib-txn"

// Reframe returns the body a transaction's record is stored with in its
// target: the producer's body with the reference header added, and its
// new CRC32C. The producer id and sequence are dropped: the transaction,
// not the producer table, makes the copy exactly-once, and a copy must not
// move a producer's sequence.
func Reframe(body []byte, id uint64, index uint32) ([]byte, uint32, error) {
	view, err := record.Parse(body)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: stored record of transaction %d: %w", ErrMalformed, id, err)
	}
	var headers []record.Header
	for name, value := range view.Headers() {
		headers = append(headers, record.Header{Name: string(name), Value: value})
	}
	headers = append(headers, record.Header{Name: ReferenceHeader, Value: appendReference(nil, id, index)})
	out, err := record.AppendBody(make([]byte, 0, len(body)+48), record.Body{Codec: view.Codec, Key: view.Key,
		Subject: view.Subject, Headers: headers, Payload: view.Payload, RawLength: view.RawLength})
	if err != nil {
		return nil, 0, fmt.Errorf("%w: record of transaction %d: %w", ErrMalformed, id, err)
	}
	return out, record.Checksum(out), nil
}

// ReframedGrowth bounds how many bytes Reframe adds to a body.
const ReframedGrowth = 2 + len(ReferenceHeader) + 4 + 20 + 1 + 10

func appendReference(dst []byte, id uint64, index uint32) []byte {
	dst = strconv.AppendUint(dst, id, 10)
	dst = append(dst, ':')
	return strconv.AppendUint(dst, uint64(index), 10)
}

// Reference returns the transaction id and index a stored body carries
// in its ReferenceHeader (ok false when it carries none or the body does
// not parse).
func Reference(body []byte) (id uint64, index uint32, ok bool) {
	view, err := record.Parse(body)
	if err != nil || len(view.HeaderBytes) == 0 {
		return 0, 0, false
	}
	for name, value := range view.Headers() {
		if string(name) == ReferenceHeader {
			return parseReference(value)
		}
	}
	return 0, 0, false
}

func parseReference(value []byte) (uint64, uint32, bool) {
	at := bytes.IndexByte(value, ':')
	if at < 0 {
		return 0, 0, false
	}
	id, err := strconv.ParseUint(string(value[:at]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	index, err := strconv.ParseUint(string(value[at+1:]), 10, 32)
	if err != nil {
		return 0, 0, false
	}
	return id, uint32(index), true
}
