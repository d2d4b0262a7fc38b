// Package units reads and writes the sizes and ages operators type: sizes
// in binary units (64MiB, 512KiB, 4096B; a bare number is bytes) and ages
// as Go durations with "d" for days.
//
// Invariants: a parsed size is never negative and at most 2^62 bytes, so
// sums of a few sizes cannot overflow an int64; FormatSize prints a size
// that ParseSize reads back to the same number of bytes.
package units
