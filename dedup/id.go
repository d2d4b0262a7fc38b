package dedup

import "github.com/ironbus/ironbus/record"

// MessageID returns the message id a parsed record body carries (its
// first HeaderName header), or nil. It allocates nothing; the id aliases
// the body.
func MessageID(v record.View) []byte {
	for name, value := range v.Headers() {
		if string(name) == HeaderName {
			return value
		}
	}
	return nil
}
