package subject_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ironbus/ironbus/subject"
)

var fuzzSeeds = []string{
	"orders.eu.created", "a", "*", ">", "a.*.c", "a.>", "a.>.b", "a*", ">b", "a..b", ".a", "a.",
	"a b", "a\tb", "a\r\nPUB x 0", "a\x00b", "a\x7f", "\xff", "ü.日本", "a.\u00a0", "a.\u009b",
	strings.Repeat("a.", 40) + "a", strings.Repeat("x", 300),
}

// checkRefusal: every refusal is a *SyntaxError of the right kind whose
// message holds no control character and no invalid UTF-8, whatever the
// input held.
func checkRefusal(t *testing.T, err, kind error, input []byte) {
	var syntax *subject.SyntaxError
	if !errors.As(err, &syntax) || !errors.Is(err, kind) {
		t.Fatalf("%q: %v is not a *SyntaxError wrapping %v", input, err, kind)
	}
	message := err.Error()
	if !utf8.ValidString(message) || strings.ContainsFunc(message, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		t.Fatalf("%q: unsafe error message %q", input, message)
	}
	if syntax.Offset > len(input) || syntax.Token > subject.MaxTokens {
		t.Fatalf("%q: %v points past the input", input, err)
	}
}

func FuzzValidate(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		err := subject.Validate(input)
		if err != nil {
			checkRefusal(t, err, subject.ErrInvalidSubject, input)
			return
		}
		text := string(input)
		if len(input) > subject.MaxLength || strings.Count(text, ".") >= subject.MaxTokens ||
			!utf8.Valid(input) || strings.ContainsAny(text, "*> \t\r\n\x00\x7f") || strings.Contains(text, "..") ||
			strings.HasPrefix(text, ".") || strings.HasSuffix(text, ".") {
			t.Fatalf("Validate accepted %q", input)
		}
		if subject.ValidatePattern(input) != nil {
			t.Fatalf("%q is a subject but not a pattern", input)
		}
		if !subject.Match(input, input) {
			t.Fatalf("the subject %q does not match itself as a pattern", input)
		}
	})
}

func FuzzValidatePattern(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		err := subject.ValidatePattern(input)
		text := string(input)
		if isASCIIOnly(text) && referenceValidPattern(text) != (err == nil) {
			t.Fatalf("ValidatePattern(%q) = %v, the reference disagrees", input, err)
		}
		if err != nil {
			checkRefusal(t, err, subject.ErrInvalidPattern, input)
			if _, compileErr := subject.Compile(input); compileErr == nil {
				t.Fatalf("Compile accepted %q", input)
			}
			return
		}
		compiled, compileErr := subject.Compile(input)
		if compileErr != nil || compiled.String() != text {
			t.Fatalf("Compile(%q) = %v, %v", input, compiled, compileErr)
		}
		if !subject.Overlap(input, input) {
			t.Fatalf("%q does not overlap itself", input)
		}
	})
}

func isASCIIOnly(text string) bool {
	for index := range len(text) {
		if text[index] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// FuzzMatch checks Match and Overlap against the reference on any pair of
// inputs: both must be valid for a match, and then the token recursion
// decides.
func FuzzMatch(f *testing.F) {
	pairs := [][2]string{
		{"a.*", "a.b"}, {"a.>", "a"}, {">", "a.b.c"}, {"*.b", "a.b"}, {"a.*", "a.*"},
		{"a..b", "a..b"}, {"a.>", "a.b."}, {"*", ""}, {"a.b", "a.b.c"}, {"a\x00", "a\x00"},
	}
	for _, pair := range pairs {
		f.Add([]byte(pair[0]), []byte(pair[1]))
	}
	f.Fuzz(func(t *testing.T, pattern, input []byte) {
		valid := subject.ValidatePattern(pattern) == nil && subject.Validate(input) == nil
		want := valid && referenceMatch(tokens(string(pattern)), tokens(string(input)))
		if got := subject.Match(pattern, input); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", pattern, input, got, want)
		}
		if compiled, err := subject.Compile(pattern); err == nil && compiled.Match(input) != want {
			t.Fatalf("Compile(%q).Match(%q) = %v, reference says %v", pattern, input, !want, want)
		}
		// A literal subject is a pattern matched by exactly itself, so
		// Overlap with it is Match.
		if subject.Validate(input) == nil && subject.Overlap(pattern, input) != want {
			t.Fatalf("Overlap(%q, %q) = %v, Match says %v", pattern, input, !want, want)
		}
		table, err := subject.NewTable(subject.Binding{Pattern: string(pattern), Stream: "s"})
		if err != nil {
			return
		}
		if _, ok := table.Lookup(input); ok != want {
			t.Fatalf("a table binding %q: Lookup(%q) = %v, Match says %v", pattern, input, ok, want)
		}
	})
}
