// Package lines splits a byte stream into lines of bounded length, for
// commands that take one record per line of standard input.
//
// Invariants:
//
//   - A line longer than the limit is refused as soon as it passes the
//     limit, before it is read whole: a stray binary file costs no more
//     memory than one line of the limit plus the reader's buffer.
//   - A line is returned without its newline, nor a carriage return before
//     it; the last line needs no newline, and an empty input has no line.
package lines
