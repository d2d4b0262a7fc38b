package termscreen

import (
	"strings"
	"testing"
)

func TestDecodeKeysNamesWhatTheScreenBinds(t *testing.T) {
	cases := []struct {
		input string
		keys  []string
	}{
		{"q", []string{"q"}},
		{"sr/?g", []string{"s", "r", "/", "?", "g"}},
		{"\x03", []string{"ctrl+c"}},
		{"\x1b", []string{"esc"}},
		{"\r", []string{"enter"}},
		{"\x7f", []string{"backspace"}},
		{"a b", []string{"a", "space", "b"}},
		{"é漢", []string{"é", "漢"}},
		// Sequences the screen binds nothing to are skipped whole, so an
		// arrow key is not an Esc that quits.
		{"\x1b[A\x1b[1;5Cq", []string{"q"}},
		{"\x1bOPq", []string{"q"}},
		{"\x1bq", nil},
		{"\x1b]11;rgb:0000/0000/0000\x07q", []string{"q"}},
		{"\x01\tq", []string{"q"}},
		{"\x1b[", nil},
	}
	for _, c := range cases {
		var got []string
		for _, key := range decodeKeys([]byte(c.input)) {
			got = append(got, key.String())
		}
		if strings.Join(got, " ") != strings.Join(c.keys, " ") {
			t.Errorf("decodeKeys(%q) = %q, want %q", c.input, got, c.keys)
		}
	}
}

func TestDecodeKeysKeepsTheTextOfASpace(t *testing.T) {
	keys := decodeKeys([]byte(" "))
	if len(keys) != 1 || keys[0].Key().Text != " " {
		t.Fatalf("decodeKeys(\" \") = %+v, want one key with text \" \"", keys)
	}
}

func TestDrawFrameEndsEachLineForARawTerminal(t *testing.T) {
	var out strings.Builder
	if err := drawFrame(&out, "one\ntwo"); err != nil {
		t.Fatal(err)
	}
	if want := "\x1b[Hone\x1b[K\r\ntwo\x1b[K\x1b[J"; out.String() != want {
		t.Fatalf("drawFrame wrote %q, want %q", out.String(), want)
	}
}
