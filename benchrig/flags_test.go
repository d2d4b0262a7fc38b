package benchrig

import (
	"slices"
	"testing"
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
