// Package codectest holds what the tests of the byte codecs (package
// record and package segment/format) share: seeded random inputs that
// lean towards edge values, the prefix lengths a decoder is tried at, and
// the checks that a decoder's error is one of its documented classes.
//
// It is imported only by tests. Invariants: every helper is deterministic
// for a given seed, so a failing property test replays; no helper
// allocates more than the input it is asked for.
package codectest
