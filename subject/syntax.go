package subject

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Limits on a subject or pattern. They bound the work any one subject can
// cost (validation, matching, a trie walk) and the memory a cached subject
// holds, whatever a client sends.
const (
	// MaxLength is the longest subject or pattern, in bytes.
	MaxLength = 256
	// MaxTokens is the most dot-separated tokens a subject or pattern has.
	MaxTokens = 32
)

// Sentinel errors; every error of this package wraps one of them.
var (
	// ErrInvalidSubject: a literal subject breaks the syntax (the error
	// is a *SyntaxError saying what and where).
	ErrInvalidSubject = errors.New("subject: invalid subject")
	// ErrInvalidPattern: a pattern breaks the syntax (a *SyntaxError).
	ErrInvalidPattern = errors.New("subject: invalid pattern")
	// ErrAmbiguous: a binding would let one subject route to two streams
	// (an *AmbiguousError naming the binding it collides with).
	ErrAmbiguous = errors.New("subject: ambiguous binding")
	// ErrNotBound: Unbind found no binding with that pattern.
	ErrNotBound = errors.New("subject: pattern not bound")
	// ErrNoStream: a binding names no stream.
	ErrNoStream = errors.New("subject: binding names no stream")
	// ErrNoTable: a Router.Update callback returned neither a table nor
	// an error.
	ErrNoTable = errors.New("subject: update produced no table")
)

// SyntaxError says why a subject or pattern was refused and where. It
// never quotes the input itself beyond one offending character (escaped),
// so the message is safe to log or send back whatever the input held.
type SyntaxError struct {
	Kind   error  // ErrInvalidSubject or ErrInvalidPattern
	Reason string // what is wrong, e.g. "empty token"
	Token  int    // zero-based token index, -1 when the whole input is at fault
	Offset int    // byte offset of the fault, -1 when the whole input is at fault
}

func (e *SyntaxError) Error() string {
	if e.Token < 0 {
		return fmt.Sprintf("%v: %s", e.Kind, e.Reason)
	}
	return fmt.Sprintf("%v: %s at byte %d (token %d)", e.Kind, e.Reason, e.Offset, e.Token)
}

func (e *SyntaxError) Unwrap() error { return e.Kind }

// Validate checks a literal subject: the kind publishers send and records
// carry. It holds no wildcards.
func Validate(subject []byte) error {
	return check(subject, false)
}

// ValidatePattern checks a pattern: a subject whose tokens may also be `*`
// (exactly one token) and, as the last token only, `>` (one or more
// tokens).
func ValidatePattern(pattern []byte) error {
	return check(pattern, true)
}

// check walks the input once. A wildcard character is legal only as a
// whole token of a pattern; everything else that could confuse a reader of
// the subject (separators, whitespace, controls, broken UTF-8) is refused,
// so a subject can never smuggle protocol or log structure.
func check(input []byte, pattern bool) error {
	kind := ErrInvalidSubject
	if pattern {
		kind = ErrInvalidPattern
	}
	fail := func(reason string, token, offset int) error {
		return &SyntaxError{Kind: kind, Reason: reason, Token: token, Offset: offset}
	}
	if len(input) == 0 {
		return fail("empty", -1, -1)
	}
	if len(input) > MaxLength {
		return fail(fmt.Sprintf("%d bytes, longer than the maximum %d", len(input), MaxLength), -1, -1)
	}
	token, tokenStart := 0, 0
	for offset := 0; offset < len(input); {
		character := input[offset]
		// Most bytes of real subjects are letters, '_' or '-' and the like:
		// '?' to '~' holds none of the separators, wildcards or controls,
		// so one unsigned comparison settles them.
		if character-'?' < 0x7f-'?' {
			offset++
			continue
		}
		switch {
		case character == '.':
			if offset == tokenStart {
				return fail("empty token", token, offset)
			}
			token++
			if token >= MaxTokens {
				return fail(fmt.Sprintf("more than the maximum %d tokens", MaxTokens), token, offset+1)
			}
			offset++
			tokenStart = offset
			continue
		case character == '*' || character == '>':
			if err := checkWildcard(input, character, offset, tokenStart, pattern); err != "" {
				return fail(err, token, offset)
			}
			offset++
			continue
		case character == ' ':
			return fail("whitespace ' '", token, offset)
		case character < 0x20 || character == 0x7f:
			return fail(fmt.Sprintf("control character %#02x", character), token, offset)
		case character < utf8.RuneSelf:
			offset++
			continue
		}
		r, size := utf8.DecodeRune(input[offset:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return fail(fmt.Sprintf("invalid UTF-8 byte %#02x", character), token, offset)
		case unicode.IsSpace(r):
			return fail(fmt.Sprintf("whitespace %U", r), token, offset)
		case unicode.IsControl(r):
			return fail(fmt.Sprintf("control character %U", r), token, offset)
		}
		offset += size
	}
	if tokenStart == len(input) {
		return fail("empty token", token, len(input))
	}
	return nil
}

// checkWildcard returns why a wildcard character at offset is illegal, or
// "" when it is a whole `*` token, or a whole `>` last token, of a
// pattern.
func checkWildcard(input []byte, character byte, offset, tokenStart int, pattern bool) string {
	if !pattern {
		return fmt.Sprintf("wildcard %q in a literal subject", character)
	}
	next := offset + 1
	if offset != tokenStart || (next < len(input) && input[next] != '.') {
		return fmt.Sprintf("wildcard %q mixed with other characters in a token", character)
	}
	if character == '>' && next != len(input) {
		return "wildcard '>' before the last token"
	}
	return ""
}

// nextToken splits the first token off a non-empty remainder. last is true
// when no separator follows; rest is then empty.
func nextToken(remainder []byte) (token, rest []byte, last bool) {
	for index, character := range remainder {
		if character == '.' {
			return remainder[:index], remainder[index+1:], false
		}
	}
	return remainder, nil, true
}

func isToken(token []byte, wildcard byte) bool {
	return len(token) == 1 && token[0] == wildcard
}

// Match reports whether the pattern matches the literal subject. Both must
// be valid (an invalid pattern or subject matches nothing). It does not
// allocate: the walk compares tokens in place, and validation runs only
// when the walk says yes, so a sparse filter pays it only on hits.
func Match(pattern, subject []byte) bool {
	return matchTokens(pattern, subject) && Validate(subject) == nil && ValidatePattern(pattern) == nil
}

// matchTokens is the walk Match does, without validation.
func matchTokens(pattern, subject []byte) bool {
	if len(pattern) == 0 || len(subject) == 0 {
		return false
	}
	for {
		patternToken, patternRest, patternLast := nextToken(pattern)
		if isToken(patternToken, '>') {
			return true
		}
		subjectToken, subjectRest, subjectLast := nextToken(subject)
		if !isToken(patternToken, '*') && string(patternToken) != string(subjectToken) {
			return false
		}
		if patternLast || subjectLast {
			return patternLast && subjectLast
		}
		pattern, subject = patternRest, subjectRest
	}
}

// Overlap reports whether some literal subject matches both patterns, so
// two bindings with these patterns would compete for it. Invalid patterns
// overlap nothing.
//
// Tokens pair up from the left: two literals must be equal, `*` pairs with
// anything, and `>` on either side absorbs the other's remaining tokens
// (there is at least one, the one it faces, and any valid pattern tail is
// satisfiable). Ending together overlaps; ending first does not, because
// the other side still needs at least one token (`>` too).
func Overlap(a, b []byte) bool {
	if ValidatePattern(a) != nil || ValidatePattern(b) != nil {
		return false
	}
	for {
		tokenA, restA, lastA := nextToken(a)
		tokenB, restB, lastB := nextToken(b)
		if isToken(tokenA, '>') || isToken(tokenB, '>') {
			return true
		}
		if !isToken(tokenA, '*') && !isToken(tokenB, '*') && string(tokenA) != string(tokenB) {
			return false
		}
		if lastA || lastB {
			return lastA && lastB
		}
		a, b = restA, restB
	}
}

// Pattern is a validated pattern, ready to match subjects (it satisfies
// the segment package's Matcher).
type Pattern struct {
	text []byte
}

// Compile validates a pattern and keeps a private copy of it.
func Compile(pattern []byte) (*Pattern, error) {
	if err := ValidatePattern(pattern); err != nil {
		return nil, err
	}
	return &Pattern{text: append([]byte(nil), pattern...)}, nil
}

// Match reports whether the literal subject matches the pattern; an
// invalid subject matches nothing. It does not allocate.
func (p *Pattern) Match(subject []byte) bool {
	return matchTokens(p.text, subject) && Validate(subject) == nil
}

// String returns the pattern as written.
func (p *Pattern) String() string { return string(p.text) }
