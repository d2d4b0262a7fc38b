//go:build !unix

package vfs

import (
	"fmt"
	"os"
)

func mapFile(file *os.File, length int64) (Mapping, error) { return readWhole(file, length) }

func mapFileLive(*os.File, int64) (Mapping, error) {
	return nil, fmt.Errorf("%w: live mappings on this platform", ErrNotSupported)
}
