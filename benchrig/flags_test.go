package benchrig

import (
	"slices"
	"testing"
	"time"
)

func TestParseSizes(t *testing.T) {
	if sizes, err := ParseSizes("256, 1024"); err != nil || !slices.Equal(sizes, []int{256, 1024}) {
		t.Fatalf("ParseSizes: %v %v", sizes, err)
	}
	for _, bad := range []string{"", "0", "-5", "1k", "256,"} {
		if _, err := ParseSizes(bad); err == nil {
			t.Errorf("ParseSizes(%q) accepted", bad)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for text, want := range map[string]time.Duration{"5": 5 * time.Second, "2.5": 2500 * time.Millisecond, "1m": time.Minute, "300ms": 300 * time.Millisecond} {
		if got, err := ParseDuration(text); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "0s", "soon", "5 s"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}
