//go:build !unix

package vfs

import "os"

func mapFile(file *os.File, length int64) (Mapping, error) { return readWhole(file, length) }
