//go:build !linux

package logbench

import "errors"

func deviceWrittenBytes(string) (uint64, error) {
	return 0, errors.New("device write accounting is Linux-only")
}
