package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// Exit codes are a frozen contract: scripts, init systems and monitoring
// branch on them, so a code never changes meaning and a new condition gets
// a new code. docs/CLI.md carries the same table.
const (
	exitClean    = 0 // nothing wrong (torn tails are reported but clean)
	exitUsage    = 1 // bad flags or arguments
	exitNotFound = 2 // the data directory, stream or log does not exist
	exitDamage   = 3 // acknowledged data is damaged, or a log is frozen
	// exitRefused shares 3 with exitDamage for the client commands: the
	// broker refused a request (too large, wrong group type, no route).
	exitRefused    = 3
	exitUnreadable = 4 // the data cannot be read (I/O error, inconsistent or too-new format)
	exitLocked     = 5 // a running broker holds the data directory
	// exitUnreachable shares 5 with exitLocked: both mean "the running
	// broker is in the way or out of reach" (report, server).
	exitUnreachable = 5
	// exitNotAuthorized: the broker refused the credentials, or the
	// identity lacks the scope for the request.
	exitNotAuthorized = 6
	exitInternal      = 70 // a bug in ironbus (EX_SOFTWARE in sysexits.h)
)

// exitError is an error that decides the process exit code. Commands return
// it (possibly wrapped with %w); main finds it with errors.As.
type exitError struct {
	code int
	err  error
	// reported means the command already told the user everything (verify
	// printed its report), so main adds no message of its own.
	reported bool
}

func (e *exitError) Error() string { return e.err.Error() }

func (e *exitError) Unwrap() error { return e.err }

// exitErrorf builds an exitError; the format may wrap a cause with %w.
// It stays out of line: inlined, each of its two hundred call sites would
// carry its own copy of fmt.Errorf's inlined fast path.
//
//go:noinline
func exitErrorf(code int, format string, args ...any) *exitError {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// exitCodeOf maps a command's error to the exit code. An error that carries
// no exitError can only come from cobra's own flag and argument checks,
// because every RunE is wrapped by classified, so it is a usage error.
func exitCodeOf(err error) int {
	if err == nil {
		return exitClean
	}
	var exit *exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	return exitUsage
}

// classified turns a command body into a cobra RunE; any error the body
// did not classify leaves as an internal error (70) rather than passing
// for a usage error. Arguments are refused by cobra.NoArgs beforehand.
func classified(body func() error) func(*cobra.Command, []string) error {
	// The closure is copied wherever classified is inlined, so its work
	// is in classify, once.
	return func(*cobra.Command, []string) error { return classify(body()) }
}

// classify passes an error the body classified and marks any other as
// internal.
func classify(err error) error {
	var exit *exitError
	if err != nil && !errors.As(err, &exit) {
		return &exitError{code: exitInternal, err: fmt.Errorf("internal error: %w", err)}
	}
	return err
}

// severity orders the per-log outcomes verify combines: the process exits
// with the most serious one. Locked and usage never come from a single log.
var severity = map[int]int{
	exitClean:      0,
	exitNotFound:   1,
	exitDamage:     2,
	exitUnreadable: 3,
	exitInternal:   4,
}

// worseExitCode returns whichever of a and b is more serious.
func worseExitCode(a, b int) int {
	if severity[b] > severity[a] {
		return b
	}
	return a
}
