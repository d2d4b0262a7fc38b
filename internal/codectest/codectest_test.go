package codectest

import (
	"errors"
	"slices"
	"testing"
)

func TestPrefixLengthsStayInsideTheInput(t *testing.T) {
	for _, total := range []int{0, 1, 256, 257, 10_000} {
		lengths := PrefixLengths(total, 36, total-8)
		for _, n := range lengths {
			if n < 0 || n >= total {
				t.Fatalf("total %d: prefix %d outside [0, %d)", total, n, total)
			}
		}
		if total > 0 && total <= 256 && len(lengths) != total {
			t.Fatalf("total %d: %d prefixes, want every one", total, len(lengths))
		}
		if total > 256 && !slices.Contains(lengths, 36) {
			t.Fatalf("total %d: the interesting length 36 is not tried: %v", total, lengths)
		}
	}
}

func TestSeededInputsReplay(t *testing.T) {
	a, b := NewRand(7), NewRand(7)
	for range 100 {
		if EdgyUint64(a) != EdgyUint64(b) {
			t.Fatal("the same seed gave different values")
		}
	}
	if got := RandomBytes(NewRand(1), 5); len(got) != 5 {
		t.Fatalf("RandomBytes gave %d bytes", len(got))
	}
}

func TestSizeName(t *testing.T) {
	for size, want := range map[int]string{256: "256B", 4096: "4KiB", 1 << 20: "1MiB"} {
		if got := SizeName(size); got != want {
			t.Fatalf("SizeName(%d) = %q, want %q", size, got, want)
		}
	}
}

func TestRequireKnownErrorAcceptsAWrappedClass(t *testing.T) {
	class := errors.New("class")
	RequireKnownError(t, errors.Join(errors.New("detail"), class), "joined", errors.New("other"), class)
}
