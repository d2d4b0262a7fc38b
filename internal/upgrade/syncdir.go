//go:build !windows

package upgrade

import "os"

// syncDir makes the renames and links in dir durable: without it a power
// cut can bring back the old directory entries after the command said it
// was done.
func syncDir(dir string) error {
	handle, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer handle.Close()
	return handle.Sync()
}
