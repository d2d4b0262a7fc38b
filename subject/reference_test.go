package subject_test

import "strings"

// The reference model the tests check the package against: plain token
// slices and recursion, written for obviousness rather than speed.

func tokens(text string) []string { return strings.Split(text, ".") }

// referenceMatch reports whether pattern tokens match subject tokens.
func referenceMatch(pattern, subject []string) bool {
	if len(pattern) == 0 {
		return len(subject) == 0
	}
	if pattern[0] == ">" {
		return len(subject) >= 1
	}
	if len(subject) == 0 {
		return false
	}
	if pattern[0] != "*" && pattern[0] != subject[0] {
		return false
	}
	return referenceMatch(pattern[1:], subject[1:])
}

// referenceValid is a second, independent statement of the syntax rules,
// for well-formed ASCII-only inputs the fuzzers and property tests make.
func referenceValidPattern(text string) bool {
	if text == "" || len(text) > 256 {
		return false
	}
	parts := tokens(text)
	if len(parts) > 32 {
		return false
	}
	for index, part := range parts {
		if part == "" {
			return false
		}
		if part == ">" && index != len(parts)-1 {
			return false
		}
		if part != "*" && part != ">" && strings.ContainsAny(part, "*>") {
			return false
		}
		for _, r := range part {
			if r <= ' ' || r == 0x7f || r >= 0x80 {
				return false
			}
		}
	}
	return true
}

func referenceValidSubject(text string) bool {
	return referenceValidPattern(text) && !strings.ContainsAny(text, "*>")
}

// allSubjects lists every subject of 1 to maxTokens tokens over alphabet.
func allSubjects(alphabet []string, maxTokens int) [][]string {
	var all [][]string
	level := [][]string{{}}
	for length := 1; length <= maxTokens; length++ {
		var next [][]string
		for _, prefix := range level {
			for _, token := range alphabet {
				subject := append(append([]string(nil), prefix...), token)
				next = append(next, subject)
			}
		}
		all = append(all, next...)
		level = next
	}
	return all
}
