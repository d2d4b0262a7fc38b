package clicontext

import (
	"fmt"
	"os"
)

// CheckSecretFile checks only that the file exists and is regular:
// Windows permissions are ACLs, which the mode bits do not reflect.
func CheckSecretFile(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("clicontext: secret file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("clicontext: secret file %s is not a regular file", path)
	}
	return nil
}

// syncDir is a no-op: Windows cannot open a directory to flush it, and
// MoveFileEx already makes the rename durable.
func syncDir(string) error { return nil }
