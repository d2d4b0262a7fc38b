package subject_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/subject"
)

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", subject.MaxLength+1)
	many := strings.Repeat("a.", subject.MaxTokens) + "a"
	tests := []struct {
		input  string
		reason string // "" when valid
		token  int
		offset int
	}{
		{"orders", "", 0, 0},
		{"orders.eu.created", "", 0, 0},
		{"orders-1_x:y/z@2", "", 0, 0},
		{"ü.日本", "", 0, 0},
		{strings.Repeat("a", subject.MaxLength), "", 0, 0},
		{strings.Repeat("a.", subject.MaxTokens-1) + "a", "", 0, 0},
		{"", "empty", -1, -1},
		{long, "longer than the maximum", -1, -1},
		{many, "more than the maximum 32 tokens", 32, 64},
		{".a", "empty token", 0, 0},
		{"a.", "empty token", 1, 2},
		{"a..b", "empty token", 1, 2},
		{".", "empty token", 0, 0},
		{"a b", "whitespace", 0, 1},
		{"a.b\tc", "control character 0x09", 1, 3},
		{"a\r\nPUB x", "control character 0x0d", 0, 1},
		{"a\x00", "control character 0x00", 0, 1},
		{"a\x7f", "control character 0x7f", 0, 1},
		{"a.\u00a0", "whitespace U+00A0", 1, 2},
		{"a.\u2028", "whitespace U+2028", 1, 2},
		{"a.\u0085", "whitespace U+0085", 1, 2},
		{"a.\u009b[2J", "control character U+009B", 1, 2},
		{"a.\xff", "invalid UTF-8 byte 0xff", 1, 2},
		{"a.\xc3", "invalid UTF-8 byte 0xc3", 1, 2},
		{"a.*", "wildcard '*' in a literal subject", 1, 2},
		{">", "wildcard '>' in a literal subject", 0, 0},
		{"a.b*", "wildcard '*' in a literal subject", 1, 3},
	}
	for _, test := range tests {
		err := subject.Validate([]byte(test.input))
		checkSyntax(t, "Validate", test.input, err, subject.ErrInvalidSubject, test.reason, test.token, test.offset)
	}
}

func TestValidatePattern(t *testing.T) {
	tests := []struct {
		input  string
		reason string
		token  int
		offset int
	}{
		{"orders", "", 0, 0},
		{"*", "", 0, 0},
		{">", "", 0, 0},
		{"a.*.c", "", 0, 0},
		{"a.*.>", "", 0, 0},
		{"*.*.*", "", 0, 0},
		{"", "empty", -1, -1},
		{"a.>.c", "wildcard '>' before the last token", 1, 2},
		{">.a", "wildcard '>' before the last token", 0, 0},
		{"a*", "wildcard '*' mixed with other characters in a token", 0, 1},
		{"*a", "wildcard '*' mixed with other characters in a token", 0, 0},
		{"a.>b", "wildcard '>' mixed with other characters in a token", 1, 2},
		{"a.b>", "wildcard '>' mixed with other characters in a token", 1, 3},
		{"**", "wildcard '*' mixed with other characters in a token", 0, 0},
		{"a.*.", "empty token", 2, 4},
		{"a. *", "whitespace", 1, 2},
		{"a.\n", "control character 0x0a", 1, 2},
	}
	for _, test := range tests {
		err := subject.ValidatePattern([]byte(test.input))
		checkSyntax(t, "ValidatePattern", test.input, err, subject.ErrInvalidPattern, test.reason, test.token, test.offset)
	}
}

func checkSyntax(t *testing.T, function, input string, err, kind error, reason string, token, offset int) {
	t.Helper()
	if reason == "" {
		if err != nil {
			t.Errorf("%s(%q) = %v, want nil", function, input, err)
		}
		return
	}
	var syntax *subject.SyntaxError
	if !errors.As(err, &syntax) || !errors.Is(err, kind) {
		t.Errorf("%s(%q) = %v, want a *SyntaxError wrapping %v", function, input, err, kind)
		return
	}
	if !strings.Contains(syntax.Reason, reason) || syntax.Token != token || syntax.Offset != offset {
		t.Errorf("%s(%q) = %q (token %d, byte %d), want %q (token %d, byte %d)",
			function, input, err, syntax.Token, syntax.Offset, reason, token, offset)
	}
	for _, character := range err.Error() {
		if character < ' ' || character == 0x7f {
			t.Errorf("%s(%q): the error message holds a control character: %q", function, input, err)
		}
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, subject string
		want             bool
	}{
		{"a", "a", true},
		{"a", "b", false},
		{"a", "a.b", false},
		{"a.b", "a", false},
		{"*", "a", true},
		{"*", "a.b", false},
		{">", "a", true},
		{">", "a.b.c", true},
		{"a.>", "a", false},
		{"a.>", "a.b", true},
		{"a.>", "a.b.c", true},
		{"a.*.c", "a.b.c", true},
		{"a.*.c", "a.b.d", false},
		{"*.>", "a", false},
		{"*.>", "a.b", true},
		{"ab", "a", false},
		{"a", "ab", false},
		{"a.*", "a.*", false},   // a wildcard is never a literal subject
		{"a.b.", "a.b.", false}, // invalid on both sides
		{"a>", "a>", false},
		{"a.>", "a.b..c", false},
	}
	for _, test := range tests {
		if got := subject.Match([]byte(test.pattern), []byte(test.subject)); got != test.want {
			t.Errorf("Match(%q, %q) = %v, want %v", test.pattern, test.subject, got, test.want)
		}
		compiled, err := subject.Compile([]byte(test.pattern))
		if err != nil {
			continue
		}
		if got := compiled.Match([]byte(test.subject)); got != test.want {
			t.Errorf("Compile(%q).Match(%q) = %v, want %v", test.pattern, test.subject, got, test.want)
		}
		if compiled.String() != test.pattern {
			t.Errorf("Compile(%q).String() = %q", test.pattern, compiled.String())
		}
	}
}

func TestCompileCopiesAndRefuses(t *testing.T) {
	input := []byte("a.*")
	compiled, err := subject.Compile(input)
	if err != nil {
		t.Fatal(err)
	}
	input[0] = 'b'
	if !compiled.Match([]byte("a.x")) {
		t.Error("the pattern changed with its caller's buffer")
	}
	if _, err := subject.Compile([]byte("a.>.b")); !errors.Is(err, subject.ErrInvalidPattern) {
		t.Errorf("Compile(a.>.b) = %v, want ErrInvalidPattern", err)
	}
}

func TestOverlap(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"a", "a", true},
		{"a", "b", false},
		{"a.*", "a.b", true},
		{"a.*", "*.b", true},
		{"a.*", "b.*", false},
		{"*", "a.b", false},
		{"*", ">", true},
		{">", "a.b.c", true},
		{"a.>", "a", false},
		{"a.>", "a.b.c", true},
		{"a.>", "*.b", true},
		{"a.>", "b.>", false},
		{"a.*.c", "a.b.>", true},
		{"a.*.c", "a.b", false},
		{"a.*.c", "a.*.d", false},
		{"*.*", "*.*.*", false},
		{"*.>", "*", false},
		{"a.>", "*.>", true},
		{"a.b", "a.b.>", false},
		{"a..b", "a..b", false}, // invalid patterns overlap nothing
	}
	for _, test := range tests {
		for _, pair := range [2][2]string{{test.a, test.b}, {test.b, test.a}} {
			if got := subject.Overlap([]byte(pair[0]), []byte(pair[1])); got != test.want {
				t.Errorf("Overlap(%q, %q) = %v, want %v", pair[0], pair[1], got, test.want)
			}
		}
	}
}
