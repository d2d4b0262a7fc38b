package client

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Sentinel errors. Calls wrap them with detail, so test with errors.Is.
// Errors the broker sends are *wire.Error values, returned as they came:
// test them with errors.Is(err, &wire.Error{Code: ...}) or errors.As.
var (
	// ErrClosed: Client.Close (or Producer.Close) was called. Calls
	// pending at that moment fail with it, and so does every later call.
	ErrClosed = errors.New("ironbus client: closed")
	// ErrConnectionLost: the connection broke (read or write failed, the
	// server closed it, sent a connection-level Error or violated the
	// protocol). Every pending and later call on the Client fails with an
	// error wrapping it and the cause. A Client never reconnects on its
	// own: Dial again (an idempotent Producer redials by itself, and fails
	// its records with it only when it gives up). A produce that was
	// pending when the connection broke may or may not have been stored.
	ErrConnectionLost = errors.New("ironbus client: connection lost")
	// ErrWindowFull: TrySend found the produce window full.
	ErrWindowFull = errors.New("ironbus client: produce window full")
	// ErrRecordTooLarge: the record body exceeds the server's
	// MaxRecordBytes, or its frame the server's MaxFrame. Checked before
	// anything is sent.
	ErrRecordTooLarge = errors.New("ironbus client: record too large")
	// ErrCorruptDelivery: a delivered record failed its CRC32C or its body
	// did not decode. The record is never handed to the caller.
	ErrCorruptDelivery = errors.New("ironbus client: corrupt delivery")
	// ErrUnsupportedRecord: a delivered record is intact but uses a body
	// version or payload codec this client cannot read.
	ErrUnsupportedRecord = errors.New("ironbus client: unsupported record format")
	// ErrDecompressedTooLarge: a delivered record declares a decompressed
	// payload above Options.MaxDecompressedBytes. It is refused before any
	// allocation, as a *DecompressError naming its offset and sizes.
	ErrDecompressedTooLarge = errors.New("ironbus client: decompressed payload over the limit")
	// ErrProtocol: the server sent something protocol version 1 does not
	// allow. The connection is closed; it wraps ErrConnectionLost too.
	ErrProtocol = errors.New("ironbus client: protocol violation")
	// ErrInvalidArgument: a call was given a value the protocol cannot
	// carry (an empty name, a field longer than its length prefix, a
	// message of another stream).
	ErrInvalidArgument = errors.New("ironbus client: invalid argument")
	// ErrInvalidSubject: a record's subject or a consumer's subject
	// filter is not valid (subject.Validate, subject.ValidatePattern);
	// nothing was sent. It wraps the subject package's error too.
	ErrInvalidSubject = errors.New("ironbus client: invalid subject")
)

// RejectedDelivery is one delivered record that Fetch refused to hand
// over. Message carries only its coordinates (Stream, Partition, Offset,
// Lease, Attempt, Redelivered, Timestamp), enough to Nack it; never its
// data.
type RejectedDelivery struct {
	Message Message
	Err     error // wraps ErrCorruptDelivery, ErrUnsupportedRecord or ErrDecompressedTooLarge
}

// DeliveryError is returned by Fetch, together with the records that did
// verify, when some delivered records could not be handed over. The
// rejected records are leased like the others: Nack them for a
// redelivery (a transport error may not repeat) or let the lease expire.
type DeliveryError struct {
	Rejected []RejectedDelivery
}

func (e *DeliveryError) Error() string {
	if len(e.Rejected) == 0 {
		return "ironbus client: no rejected deliveries"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ironbus client: %d delivered record(s) rejected", len(e.Rejected))
	for i, r := range e.Rejected {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Rejected)-i)
			break
		}
		b.WriteString("; ")
		b.WriteString(r.Err.Error())
	}
	return b.String()
}

// Unwrap exposes every rejection, so errors.Is(err, ErrCorruptDelivery)
// holds when any record was corrupt.
func (e *DeliveryError) Unwrap() []error {
	errs := make([]error, len(e.Rejected))
	for i, r := range e.Rejected {
		errs[i] = r.Err
	}
	return errs
}

// checkName rejects names the wire cannot carry faithfully (its u16
// length prefix would truncate). The broker checks its own naming rules.
func checkName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty %s name", ErrInvalidArgument, what)
	}
	if len(name) > math.MaxUint16 {
		return fmt.Errorf("%w: %s name of %d bytes", ErrInvalidArgument, what, len(name))
	}
	return nil
}
