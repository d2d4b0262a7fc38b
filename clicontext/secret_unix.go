//go:build !windows

package clicontext

import (
	"fmt"
	"os"
)

// CheckSecretFile refuses a secret file that is not a regular file or that
// anyone but its owner may read or write: a token readable by the group
// or the world is as good as leaked on a shared box.
func CheckSecretFile(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("clicontext: secret file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("clicontext: secret file %s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %04o; run `chmod 600 %s`", ErrInsecureSecret, path, perm, path)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
