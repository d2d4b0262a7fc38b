package termscreen

import (
	"os"

	"golang.org/x/sys/windows"
)

// enableEscapeCodes turns on escape-code processing on a Windows console,
// which older consoles leave off, and returns what puts the mode back.
func enableEscapeCodes(terminal *os.File) (restore func()) {
	handle := windows.Handle(terminal.Fd())
	var mode uint32
	if windows.GetConsoleMode(handle, &mode) != nil {
		return func() {}
	}
	if windows.SetConsoleMode(handle, mode|windows.ENABLE_VIRTUAL_TERMINAL_PROCESSING) != nil {
		return func() {}
	}
	return func() { _ = windows.SetConsoleMode(handle, mode) }
}
