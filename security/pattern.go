package security

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidPattern reports a stream or subject pattern that cannot match
// anything sensible.
var ErrInvalidPattern = errors.New("security: invalid pattern")

// Pattern matches stream names and subjects split into tokens on '.':
// "*" matches exactly one token, ">" (last only) matches one or more
// remaining tokens, anything else matches itself. ">" alone matches every
// name. The same matcher serves streams today and subjects later.
type Pattern struct {
	text   string
	tokens []string
}

// ParsePattern checks and compiles a pattern.
func ParsePattern(text string) (Pattern, error) {
	if text == "" {
		return Pattern{}, fmt.Errorf("%w: empty (use \">\" for every name)", ErrInvalidPattern)
	}
	tokens := strings.Split(text, ".")
	for i, token := range tokens {
		switch {
		case token == ">" && i != len(tokens)-1:
			return Pattern{}, fmt.Errorf("%w: %q: \">\" must be the last token", ErrInvalidPattern, text)
		case token != "*" && token != ">" && strings.ContainsAny(token, "*>"):
			return Pattern{}, fmt.Errorf("%w: %q: \"*\" and \">\" must be whole tokens", ErrInvalidPattern, text)
		}
	}
	return Pattern{text: text, tokens: tokens}, nil
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.text }

// Match reports whether name matches. It does not allocate.
func (p Pattern) Match(name string) bool {
	rest := name
	for i, token := range p.tokens {
		if token == ">" {
			return true // at least one token is left: the loop only goes on when there is
		}
		head, tail, more := strings.Cut(rest, ".")
		if token != "*" && token != head {
			return false
		}
		last := i == len(p.tokens)-1
		if !more || last {
			return !more && last
		}
		rest = tail
	}
	return false
}

// Patterns is a set of patterns; a name is allowed when any matches.
type Patterns []Pattern

// Match reports whether any pattern matches name.
func (ps Patterns) Match(name string) bool {
	for _, p := range ps {
		if p.Match(name) {
			return true
		}
	}
	return false
}

// ParsePatterns compiles every pattern, naming the first bad one.
func ParsePatterns(texts []string) (Patterns, error) {
	out := make(Patterns, 0, len(texts))
	for _, text := range texts {
		p, err := ParsePattern(text)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
