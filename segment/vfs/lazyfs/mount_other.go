//go:build !linux || arm || 386

package lazyfs

import "fmt"

func mount(*Disk, string) (mounter, error) {
	return nil, fmt.Errorf("%w: FUSE test mounts are built for 64-bit Linux only (go-fuse does not build for 32-bit)", ErrUnavailable)
}
