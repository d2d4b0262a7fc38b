// Package fuzz holds long-running fuzz harnesses and their scripts. The
// fuzz functions themselves live beside the decoders they exercise (record,
// segment/format, segment, wire and others), with seed corpora under each
// package's testdata/fuzz; `make fuzz-smoke` runs each for 30 s and
// `make fuzz` longer.
package fuzz
