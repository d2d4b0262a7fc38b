// Package settings turns the broker's knobs into one configuration from five
// layers, lowest first: the built-in default, a named profile, a TOML file,
// IRONBUS_* environment variables and command-line flags. It owns the names
// (a knob "segment-bytes" is the TOML key segment_bytes and the variable
// IRONBUS_SEGMENT_BYTES), the strict file decoder, the profiles, and the
// record of which layer set each value.
//
// Invariants:
//   - A knob is whatever the caller lists (in the CLI: every serve flag), so
//     a flag added later is a file key and an environment variable with no
//     code here.
//   - An unknown file key is an error that names it and, when one is close,
//     the knob that was probably meant; nothing in a file is ignored.
//   - Each layer only overrides the layers below it: a value given on the
//     command line is never touched.
//   - Parsing never panics on any input; FuzzParseFile checks it.
//
// Coupled checks (one knob against another) belong to the caller, which
// runs them once over the merged result, whatever layer each value came
// from.
package settings
