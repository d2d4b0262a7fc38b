//go:build !linux

package lazyfs

import "fmt"

func mount(*Disk, string) (mounter, error) {
	return nil, fmt.Errorf("%w: FUSE test mounts are built for Linux only", ErrUnavailable)
}
