//go:build !windows

package termscreen

import "os"

// enableEscapeCodes has nothing to do where every terminal reads escape
// codes.
func enableEscapeCodes(*os.File) (restore func()) { return func() {} }
