package load

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPayloadsCycleThroughTheSource: payloads are consecutive cuts of
// the source, wrapping at its end, so every byte of it is used.
func TestPayloadsCycleThroughTheSource(t *testing.T) {
	payloads := Payloads{Source: []byte("abcde")}
	payload := make([]byte, 3)
	position := 0
	var got []string
	for range 4 {
		position = payloads.fill(payload, position)
		got = append(got, string(payload))
	}
	if strings.Join(got, ",") != "abc,dea,bcd,eab" {
		t.Fatalf("payloads %q", got)
	}
	long := make([]byte, 12)
	payloads.fill(long, 0)
	if string(long) != "abcdeabcdeab" {
		t.Fatalf("a payload longer than the source: %q", long)
	}
	zeros := make([]byte, 4)
	if (Payloads{}).fill(zeros, 0) != 0 || string(zeros) != "\x00\x00\x00\x00" {
		t.Fatalf("without a source the payload must stay zeros: %q", zeros)
	}
}

// TestReadPayloadFile: a sample is read up to MaxPayloadFile; an empty
// file is refused, a missing one reported as os.Open's error.
func TestReadPayloadFile(t *testing.T) {
	dir := t.TempDir()
	sample, empty := filepath.Join(dir, "sample"), filepath.Join(dir, "empty")
	if err := os.WriteFile(sample, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if source, err := ReadPayloadFile(sample); err != nil || string(source) != "abc" {
		t.Fatalf("ReadPayloadFile: %q %v", source, err)
	}
	if _, err := ReadPayloadFile(empty); !errors.Is(err, ErrEmptyPayloadFile) {
		t.Fatalf("an empty file: %v", err)
	}
	if _, err := ReadPayloadFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}

// TestRunRefusesAnInvalidConfig: a configuration the generator cannot
// run is an error before anything is dialled.
func TestRunRefusesAnInvalidConfig(t *testing.T) {
	valid := Config{Mode: Publish, Producers: 1, Consumers: 1, Window: 1, PayloadBytes: StampBytes, Count: 1, Tier: Work}
	for name, change := range map[string]func(*Config){
		"mode":     func(c *Config) { c.Mode = "sideways" },
		"tier":     func(c *Config) { c.Tier = "bulk" },
		"window":   func(c *Config) { c.Window = 0 },
		"payload":  func(c *Config) { c.PayloadBytes = StampBytes - 1 },
		"length":   func(c *Config) { c.Count = 0 },
		"negative": func(c *Config) { c.Rate = -1 },
	} {
		config := valid
		change(&config)
		if _, err := Run(t.Context(), config, "127.0.0.1:1"); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Run returned %v", name, err)
		}
	}
}

// TestSubjectsCycle: the subjects records carry, by sequence.
func TestSubjectsCycle(t *testing.T) {
	if list := (Subjects{}).list(); list != nil {
		t.Fatalf("no subjects: %q", list)
	}
	if list := (Subjects{Count: 3}).list(); strings.Join(list, ",") != "bench.s0,bench.s1,bench.s2" {
		t.Fatalf("3 subjects: %q", list)
	}
	sparse := Subjects{Sparse: 3, Filter: "ignored"}
	if list := sparse.list(); strings.Join(list, ",") != "bench.match,bench.other,bench.other" || sparse.ConsumerFilter() != SparseMatch {
		t.Fatalf("sparse 1 in 3: %q, filter %q", list, sparse.ConsumerFilter())
	}
}
