package segment

import "testing"

// TestDefaultMaxOpenSegmentsOn32Bit: a 32-bit process (armv7) keeps each
// log's mapped sealed segments within mappedBytesPerLog32, so address
// space is a function of configuration there too; 64-bit keeps the
// default.
func TestDefaultMaxOpenSegmentsOn32Bit(t *testing.T) {
	cases := []struct {
		segmentSize int64
		intSize     int
		want        int
	}{
		{DefaultSegmentSize, 64, DefaultMaxOpenSegments},
		{DefaultSegmentSize, 32, 4},      // 4 × 64 MiB
		{EdgeSegmentSize, 32, 16},        // 8 MiB segments fit the default
		{1 << 30, 32, 1},                 // never below one
		{DefaultSegmentSize * 2, 64, 16}, // 64-bit never lowers it
	}
	for _, c := range cases {
		if got := defaultMaxOpenSegments(c.segmentSize, c.intSize); got != c.want {
			t.Errorf("segment %d B, %d-bit: %d open segments, want %d", c.segmentSize, c.intSize, got, c.want)
		}
	}
}
