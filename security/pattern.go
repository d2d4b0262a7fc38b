package security

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidPattern reports a stream or subject pattern that cannot match
// anything sensible.
var ErrInvalidPattern = errors.New("security: invalid pattern")

// Pattern matches names split into tokens on '.': "*" matches exactly
// one token, ">" (last only) matches one or more remaining tokens,
// anything else matches itself. A wildcard never stands for an empty
// token ("orders.*" does not match "orders."), except that ">" alone
// matches every name, dead-letter queues (".dlq.orders") included. No
// pattern matches the empty name: a request that names no stream is
// answered with what the identity may see, never all-or-nothing on a
// pattern that happens to match "". Scopes match stream names; an
// identity's publish_subjects match record subjects; the matcher is the
// same.
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
func (p Pattern) Match(name string) bool { return matchTokens(p.tokens, name) }

// MatchBytes is Match for a name held in bytes (a record's subject). It
// does not allocate.
func (p Pattern) MatchBytes(name []byte) bool { return matchTokens(p.tokens, name) }

func matchTokens[Name string | []byte](tokens []string, name Name) bool {
	if len(name) == 0 || len(tokens) == 0 {
		return false
	}
	if len(tokens) == 1 && tokens[0] == ">" {
		return true
	}
	rest := name
	for i, token := range tokens {
		head, tail, more := cutToken(rest)
		switch {
		case token == ">":
			return len(head) > 0 // and whatever follows it
		case token == "*":
			if len(head) == 0 {
				return false
			}
		case string(head) != token:
			return false
		}
		last := i == len(tokens)-1
		if !more || last {
			return !more && last
		}
		rest = tail
	}
	return false
}

// cutToken splits name at its first '.'.
func cutToken[Name string | []byte](name Name) (head, tail Name, more bool) {
	for i := range len(name) {
		if name[i] == '.' {
			return name[:i], name[i+1:], true
		}
	}
	return name, name[len(name):], false
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

// MatchBytes reports whether any pattern matches name.
func (ps Patterns) MatchBytes(name []byte) bool {
	for _, p := range ps {
		if p.MatchBytes(name) {
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

// Covers reports whether p matches every name other matches.
func (p Pattern) Covers(other Pattern) bool {
	mine, theirs := p.tokens, other.tokens
	for i, token := range mine {
		if i >= len(theirs) {
			return false
		}
		switch {
		case token == ">":
			return true // theirs has a token here, and whatever follows
		case theirs[i] == ">":
			return false // theirs goes on past where p ends, or p is narrower here
		case token != "*" && token != theirs[i]:
			return false // a literal covers only itself; "*" covers one token, any
		}
	}
	return len(mine) == len(theirs)
}

// Overlaps reports whether some name matches both p and other.
func (p Pattern) Overlaps(other Pattern) bool {
	mine, theirs := p.tokens, other.tokens
	for i := 0; i < len(mine) && i < len(theirs); i++ {
		a, b := mine[i], theirs[i]
		switch {
		case a == ">" || b == ">":
			return true
		case a != "*" && b != "*" && a != b:
			return false
		}
	}
	return len(mine) == len(theirs)
}

// Covers reports whether one pattern of ps matches every name other
// matches.
func (ps Patterns) Covers(other Pattern) bool {
	for _, p := range ps {
		if p.Covers(other) {
			return true
		}
	}
	return false
}
