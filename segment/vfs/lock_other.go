//go:build !unix

package vfs

import (
	"fmt"
	"os"
)

func lockFile(file *os.File, _ bool) error {
	return fmt.Errorf("%w: file locking for %s", ErrNotSupported, file.Name())
}
