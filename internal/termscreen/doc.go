// Package termscreen drives a bubbletea model full-screen on a terminal
// with a small loop of its own: raw mode, the alternate screen, the
// terminal's size polled, typed bytes decoded into key presses, and a frame
// drawn whenever the model's view changes. It serves `ironbus top`, whose
// model (cmd/ironbus/internal/topview) speaks bubbletea's messages (a key,
// a window size, a command that yields the next message).
//
// bubbletea's own Program, with its cell renderer, input decoder and
// terminal detection, costs about 1 MB of the binary (docs/PACKAGING.md),
// and a screen that redraws a few tables once a second uses none of what
// it adds.
//
// Invariants: the terminal is given back as it was (raw mode restored,
// the alternate screen left, the cursor shown) however Run returns; escape
// sequences the model binds no key to (arrows, function keys) are skipped
// whole, never read as an Escape followed by text; Run returns when the
// model quits or its context ends.
package termscreen
