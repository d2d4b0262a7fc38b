package record_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/internal/codectest"
	"github.com/ironbus/ironbus/record"
)

func TestCodecString(t *testing.T) {
	tests := map[record.Codec]string{
		record.CodecNone: "none",
		record.CodecLZ4:  "lz4",
		record.CodecZstd: "zstd",
		record.Codec(9):  "codec(9)",
	}
	for codec, want := range tests {
		if got := codec.String(); got != want {
			t.Errorf("Codec(%d).String() = %q, want %q", uint8(codec), got, want)
		}
		if codec.Known() != (codec <= record.CodecZstd) {
			t.Errorf("Codec(%d).Known() = %v", uint8(codec), codec.Known())
		}
	}
}

// TestErrorsAreDistinct guards the error classes callers branch on: a torn
// tail (ErrShort) must never be mistaken for corruption.
func TestErrorsAreDistinct(t *testing.T) {
	classes := []error{record.ErrShort, record.ErrCorrupt, record.ErrTooNew, record.ErrTooLarge, record.ErrMalformed}
	for i, a := range classes {
		if !strings.HasPrefix(a.Error(), "record: ") {
			t.Errorf("error %q lacks the package prefix", a)
		}
		for j, b := range classes {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v wraps %v", a, b)
			}
		}
	}
}

func TestChecksums(t *testing.T) {
	// Known answers pin the algorithms: CRC32C (Castagnoli), not IEEE, and
	// xxh3-64 with seed 0. A change here breaks every stored record.
	if got := record.Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Errorf("Checksum(123456789) = %08x, want e3069283 (CRC32C check value)", got)
	}
	if got := record.Checksum(nil); got != 0 {
		t.Errorf("Checksum(nil) = %08x, want 0", got)
	}
	large := make([]byte, record.BodyHashThreshold)
	if got := record.BodyHash(large); got == 0 {
		t.Error("BodyHash of a body at the threshold is zero")
	}
	if got := record.BodyHash(nil); got != 0 {
		t.Errorf("BodyHash(nil) = %016x, want 0 (nothing stored below the threshold)", got)
	}
}

func TestIsFrame(t *testing.T) {
	tests := []struct {
		input []byte
		want  bool
	}{
		{nil, false},
		{[]byte("I"), false},
		{[]byte("IR"), true},
		{[]byte("IRONBSEG"), true}, // only two bytes are looked at
		{[]byte("IC"), false},
		{[]byte("ir"), false},
		{[]byte{0, 0}, false},
	}
	for _, test := range tests {
		if got := record.IsFrame(test.input); got != test.want {
			t.Errorf("IsFrame(%q) = %v, want %v", test.input, got, test.want)
		}
	}
}

// TestOtherFrameLength steps over the frames a delivered run holds between
// records: the length comes from the shared frame prefix.
func TestOtherFrameLength(t *testing.T) {
	commit := make([]byte, 80)
	copy(commit, "IC\x01\x00")
	littleEndian.PutUint32(commit[4:], 80)
	if n, err := record.OtherFrameLength(append(commit, "IR"...)); err != nil || n != 80 {
		t.Fatalf("commit frame: %d, %v", n, err)
	}
	tests := []struct {
		name  string
		input []byte
		want  error
	}{
		{"empty", nil, record.ErrShort},
		{"prefix cut", commit[:7], record.ErrShort},
		{"frame cut", commit[:79], record.ErrShort},
		{"zero magic", make([]byte, 80), record.ErrCorrupt},
		{"length under the prefix", []byte("IC\x01\x00\x07\x00\x00\x00"), record.ErrCorrupt},
		{"length 4 GiB", []byte("IC\x01\x00\xff\xff\xff\xff"), record.ErrShort},
	}
	for _, test := range tests {
		_, err := record.OtherFrameLength(test.input)
		codectest.RequireErrorIs(t, err, test.want, test.name)
	}
}
