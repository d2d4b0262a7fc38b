package main

import (
	"github.com/ironbus/ironbus/backup"
	"github.com/ironbus/ironbus/segment/vfs"
)

// findSpecialEntries lists the symbolic links, FIFOs, devices and sockets
// of the data directory in output (when verify covers all of it): the
// broker makes none, so each is damage. A link leads outside the
// directory, and the logs read through it would look clean.
func findSpecialEntries(verify *verifyOptions, output *verifyOutput) error {
	if verify.stream != "" {
		return nil
	}
	entries, err := backup.SpecialEntries(vfs.OS{}, verify.dataDir)
	if err != nil {
		return exitErrorf(exitUnreadable, "looking for links in %s: %w", verify.dataDir, err)
	}
	output.SpecialEntries = entries
	if len(entries) > 0 {
		output.ExitCode = worseExitCode(output.ExitCode, exitDamage)
	}
	return nil
}
