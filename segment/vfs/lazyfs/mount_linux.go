//go:build linux && !arm && !386

package lazyfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fuseMount is a live go-fuse server for one mount.
type fuseMount struct {
	server *fuse.Server
	dir    string
}

func mount(d *Disk, dir string) (mounter, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: mounting without fusermount needs root", ErrUnavailable)
	}
	options := &fs.Options{MountOptions: fuse.MountOptions{
		// mount(2) directly: no fusermount binary is needed, and none
		// is installed on the test machines.
		DirectMountStrict: true,
		FsName:            "lazyfs",
		Name:              "lazyfs",
		DisableXAttrs:     true,
	}}
	server, err := fs.Mount(dir, &node{disk: d}, options)
	if err != nil {
		return nil, fmt.Errorf("%w: mounting at %s: %w", ErrUnavailable, dir, err)
	}
	return &fuseMount{server: server, dir: dir}, nil
}

// unmount retries a busy mount briefly: the kernel closes a killed
// process's files as it exits, and the last releases can trail the exit.
// A mount still busy after that is detached (MNT_DETACH): it leaves the
// namespace at once and its server keeps answering whoever still holds
// it, on the image it had.
func (m *fuseMount) unmount() error {
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err = m.server.Unmount()
		if err == nil || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			break
		}
	}
	if errors.Is(err, syscall.EBUSY) {
		return syscall.Unmount(m.dir, syscall.MNT_DETACH)
	}
	if err != nil {
		return err
	}
	m.server.Wait()
	return nil
}
