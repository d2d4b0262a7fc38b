package client

import (
	"fmt"

	"github.com/ironbus/ironbus/subject"
)

// checkRecordSubject validates a record's subject before anything is
// sent: a subject taken from untrusted data is refused here, typed,
// rather than by the broker. An empty subject is allowed unless the
// record is routed by it.
func checkRecordSubject(s []byte, routed bool) error {
	if len(s) == 0 {
		if routed {
			return fmt.Errorf("%w: a record routed by subject needs a subject", ErrInvalidSubject)
		}
		return nil
	}
	if err := subject.Validate(s); err != nil {
		return fmt.Errorf("%w: record subject: %w", ErrInvalidSubject, err)
	}
	return nil
}

// checkPattern validates a consumer's subject filter.
func checkPattern(pattern string) error {
	if err := subject.ValidatePattern([]byte(pattern)); err != nil {
		return fmt.Errorf("%w: subject filter: %w", ErrInvalidSubject, err)
	}
	return nil
}
