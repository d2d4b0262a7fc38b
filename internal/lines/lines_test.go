package lines

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReaderSplitsAndTrims(t *testing.T) {
	r := NewReader(strings.NewReader("one\r\ntwo\n\nlast"), 4)
	var got []string
	for {
		line, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(line))
	}
	if strings.Join(got, "|") != "one|two||last" {
		t.Fatalf("lines: %q", got)
	}
}

func TestReaderRefusesLongLines(t *testing.T) {
	for _, input := range []string{"12345\n", "12345", "1234\r\r\n", strings.Repeat("x", 3*bufferSize) + "\n"} {
		r := NewReader(strings.NewReader(input), 4)
		if _, err := r.Next(); !errors.Is(err, ErrTooLong) {
			t.Errorf("%.10q: got %v, want ErrTooLong", input, err)
		}
	}
	r := NewReader(strings.NewReader("1234\r\n"), 4)
	if line, err := r.Next(); err != nil || string(line) != "1234" {
		t.Fatalf("a line at the limit: %q %v", line, err)
	}
}

func TestReaderEmptyInput(t *testing.T) {
	if _, err := NewReader(strings.NewReader(""), 4).Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("empty input: %v", err)
	}
}
