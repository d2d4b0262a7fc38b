package record

import "bytes"

// MessageIDHeader is the header whose value is a record's message id: a
// broker deduplicates records by it within the stream's dedup window.
const MessageIDHeader = "ib-msg-id"

// MaxMessageIDBytes bounds a message id.
const MaxMessageIDBytes = 128

// MessageID returns the value of the record's ib-msg-id header, or nil.
// The first such header counts. Allocation-free.
func (v View) MessageID() []byte {
	if len(v.HeaderBytes) == 0 {
		return nil
	}
	for name, value := range walkHeaders(v.HeaderBytes) {
		if bytes.Equal(name, []byte(MessageIDHeader)) {
			return value
		}
	}
	return nil
}
