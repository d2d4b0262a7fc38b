package wire

import (
	"fmt"
	"time"
)

// Code is a structured error code. The numbers are the protocol: never
// reuse one; add new ones at the end.
type Code uint16

// Error codes of protocol version 1.
const (
	CodeMalformed         Code = 1  // a frame or body does not parse; the connection closes
	CodeFrameTooLarge     Code = 2  // a frame exceeds the negotiated maximum; the connection closes
	CodeUnknownType       Code = 3  // a frame type this server does not know
	CodeVersion           Code = 4  // no protocol version in common; the connection closes
	CodeHandshake         Code = 5  // a frame before Hello, or a second Hello; the connection closes
	CodeInvalidName       Code = 6  // a stream or group name fails validation
	CodeRecordTooLarge    Code = 7  // a record body exceeds the maximum record size
	CodeChecksum          Code = 8  // the record body does not match its CRC32C
	CodeFrozen            Code = 9  // the log is read-only after a storage failure
	CodeNoSpace           Code = 10 // the disk is full; retry later
	CodeBusy              Code = 11 // a limit is reached (window, connections); retry later
	CodeNotFound          Code = 12 // no such stream, partition or group
	CodeTimeout           Code = 13 // idle or handshake timeout; the connection closes
	CodeShuttingDown      Code = 14 // the broker is draining; reconnect elsewhere or later
	CodeInvalidRequest    Code = 15 // a field has a value the request cannot have
	CodeInternal          Code = 16 // a bug in the broker; reported, the request failed
	CodeTooManyConns      Code = 17 // the broker is at its connection limit; the connection closes
	CodeUnsupportedMode   Code = 18 // a consume mode this broker does not serve yet
	CodeGroupModeMismatch Code = 19 // the group exists with another consume mode
	CodeGroupActive       Code = 20 // a reset or delete found live members; stop the group's consumers first
	CodeNotAuthorized     Code = 21 // authentication failed (uniformly, whatever the cause); the connection closes
	CodePermissionDenied  Code = 22 // the identity lacks the scope for this stream; the connection stays
	CodeQuotaExceeded     Code = 23 // a quota of the identity or its account is reached; retry after the hint
	CodeNoRoute           Code = 24 // no stream binding matches the subject; nothing was stored
	CodeConflict          Code = 25 // the change contradicts existing state (an overlapping binding, a stream that exists differently)
	// Producer codes, sent only with CapProducers.
	CodeProducerFenced    Code = 26 // a newer incarnation of the producer holds the name; this one must stop
	CodeSequenceGap       Code = 27 // the producer's sequence skips ahead; Value is the sequence expected
	CodeProducerExpired   Code = 28 // the broker no longer holds this producer's state; resend may duplicate
	CodeUnknownProducer   Code = 29 // a producer id this broker never issued; send ProducerInit
	CodeExpectationFailed Code = 30 // a conditional append's expectation is false; Value is the actual last offset (ExpectNone: none)
	CodeBatchIncomplete   Code = 31 // an atomic batch was not committed whole; none of it is stored
	CodeUnsupportedOption Code = 32 // a critical publish option this broker does not know; nothing was stored
	CodeTxnUnknown        Code = 33 // no open transaction has this id (never begun, or already ended)
	CodeTxnAborted        Code = 34 // the transaction was aborted (its timeout passed, or a record of it was refused); none of it is visible
	CodeNotLeader         Code = 35 // this node does not lead the partition; Value is the leader's node id, Leader its client address, when known
	CodeNoLeader          Code = 36 // the partition has no leader now (an election, or no majority of its replicas reachable)
)

// CodeInfo describes an error code for docs and tests.
type CodeInfo struct {
	Code      Code
	Name      string
	Retryable bool
	Closes    bool // the server closes the connection after sending it
}

var codeInfo = []CodeInfo{
	{CodeMalformed, "malformed", false, true},
	{CodeFrameTooLarge, "frame_too_large", false, true},
	{CodeUnknownType, "unknown_type", false, false},
	{CodeVersion, "version", false, true},
	{CodeHandshake, "handshake", false, true},
	{CodeInvalidName, "invalid_name", false, false},
	{CodeRecordTooLarge, "record_too_large", false, false},
	{CodeChecksum, "checksum", false, false},
	{CodeFrozen, "frozen", false, false},
	{CodeNoSpace, "no_space", true, false},
	{CodeBusy, "busy", true, false},
	{CodeNotFound, "not_found", false, false},
	{CodeTimeout, "timeout", true, true},
	{CodeShuttingDown, "shutting_down", true, true},
	{CodeInvalidRequest, "invalid_request", false, false},
	{CodeInternal, "internal", false, false},
	{CodeTooManyConns, "too_many_connections", true, true},
	{CodeUnsupportedMode, "unsupported_mode", false, false},
	{CodeGroupModeMismatch, "group_mode_mismatch", false, false},
	{CodeGroupActive, "group_active", false, false},
	{CodeNotAuthorized, "not_authorized", false, true},
	{CodePermissionDenied, "permission_denied", false, false},
	{CodeQuotaExceeded, "quota_exceeded", true, false},
	{CodeNoRoute, "no_route", false, false},
	{CodeConflict, "conflict", false, false},
	{CodeProducerFenced, "producer_fenced", false, false},
	{CodeSequenceGap, "sequence_gap", false, false},
	{CodeProducerExpired, "producer_expired", false, false},
	{CodeUnknownProducer, "unknown_producer", false, false},
	{CodeExpectationFailed, "expectation_failed", false, false},
	{CodeBatchIncomplete, "batch_incomplete", false, false},
	{CodeUnsupportedOption, "unsupported_option", false, false},
	{CodeTxnUnknown, "txn_unknown", false, false},
	{CodeTxnAborted, "txn_aborted", false, false},
	{CodeNotLeader, "not_leader", true, false},
	{CodeNoLeader, "no_leader", true, false},
}

// Codes lists every error code of this protocol version.
func Codes() []CodeInfo { return append([]CodeInfo(nil), codeInfo...) }

// Info returns the description of c; unknown codes (from a newer peer)
// are not retryable and do not close.
func (c Code) Info() CodeInfo {
	if c >= 1 && int(c) <= len(codeInfo) {
		return codeInfo[c-1]
	}
	return CodeInfo{Code: c, Name: fmt.Sprintf("code_%d", uint16(c))}
}

func (c Code) String() string { return c.Info().Name }

// Error flag bits.
const (
	errorFlagRetryable = 1 << 0
	errorFlagCloses    = 1 << 1
	errorFlagValue     = 1 << 2 // a u64 Value follows the message
	errorFlagLeader    = 1 << 3 // a u16-length leader address follows (the value, if any, comes first)
	errorFlagsKnown    = errorFlagRetryable | errorFlagCloses | errorFlagValue | errorFlagLeader
)

// Error is the body of an Error frame, and a Go error.
type Error struct {
	Code       Code
	Retryable  bool
	Closes     bool          // the server closes the connection after it
	RetryAfter time.Duration // a hint; zero when none (millisecond precision)
	Message    string
	// Value, when HasValue, is the typed detail some codes carry (the
	// sequence a producer must send next, a partition's actual last
	// offset), so a client need not parse Message.
	HasValue bool
	Value    uint64
	// Leader, with CodeNotLeader on a connection with CapCluster, is the
	// client address of the node that leads (empty when unknown).
	Leader string
	// otherFlags keeps flag bits this version does not know, so a newer
	// peer's flags survive a decode and re-encode.
	otherFlags uint8
}

// NewError builds an Error with the code's defaults.
func NewError(code Code, format string, args ...any) *Error {
	info := code.Info()
	return &Error{Code: code, Retryable: info.Retryable, Closes: info.Closes, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	s := fmt.Sprintf("ironbus: %s (code %d)", e.Message, uint16(e.Code))
	if e.Retryable {
		s += "; retryable"
		if e.RetryAfter > 0 {
			s += " after " + e.RetryAfter.String()
		}
	}
	return s
}

// Is matches another *Error with the same code, so callers can write
// errors.Is(err, &wire.Error{Code: wire.CodeNoSpace}).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Type implements Message.
func (*Error) Type() Type { return TypeError }

// AppendBody implements Message.
func (e *Error) AppendBody(dst []byte) []byte {
	flags := e.otherFlags &^ errorFlagsKnown
	if e.Leader != "" {
		flags |= errorFlagLeader
	}
	if e.HasValue {
		flags |= errorFlagValue
	}
	if e.Retryable {
		flags |= errorFlagRetryable
	}
	if e.Closes {
		flags |= errorFlagCloses
	}
	dst = le.AppendUint16(dst, uint16(e.Code))
	dst = append(dst, flags)
	// A negative hint means none, not 49 days.
	dst = le.AppendUint32(dst, uint32(min(max(e.RetryAfter.Milliseconds(), 0), 1<<32-1)))
	dst = appendString16(dst, e.Message)
	if e.HasValue {
		dst = le.AppendUint64(dst, e.Value)
	}
	if e.Leader != "" {
		dst = appendString16(dst, e.Leader)
	}
	return dst
}

// DecodeError decodes an Error body.
func DecodeError(body []byte) (*Error, error) {
	r := reader{buf: body, what: "Error"}
	e := &Error{Code: Code(r.u16("code"))}
	flags := r.u8("flags")
	e.RetryAfter = time.Duration(r.u32("retry after")) * time.Millisecond
	e.Message = string(r.bytes16("message"))
	if flags&errorFlagValue != 0 {
		e.HasValue, e.Value = true, r.u64("value")
	}
	if flags&errorFlagLeader != 0 {
		e.Leader = string(r.bytes16("leader"))
		if r.err == nil && e.Leader == "" {
			// Encode sets the flag only for an address: one encoding
			// per message.
			r.err = fmt.Errorf("%w: Error: the leader flag is set but the address is empty", ErrMalformed)
		}
	}
	e.Retryable, e.Closes = flags&errorFlagRetryable != 0, flags&errorFlagCloses != 0
	e.otherFlags = flags &^ errorFlagsKnown
	return e, r.done()
}
