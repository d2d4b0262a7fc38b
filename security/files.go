package security

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// ErrSecretFileExposed means a secret file can be read by other users.
var ErrSecretFileExposed = errors.New("security: secret file readable by group or others")

// CheckSecretFile refuses a secret file that group or others may read or
// write: a key or token anyone on the box can copy protects nothing.
// Windows has no such mode bits and is not checked.
func CheckSecretFile(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("security: %w", err)
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %04o; run `chmod 600 %s`", ErrSecretFileExposed, path, mode, path)
	}
	return nil
}

// ReadSecretFile checks the file's mode, then reads it.
func ReadSecretFile(path string) ([]byte, error) {
	if err := CheckSecretFile(path); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("security: %w", err)
	}
	return data, nil
}

// ReadSecretLine reads a token or password file: its first line, without
// the line ending.
func ReadSecretLine(path string) ([]byte, error) {
	data, err := ReadSecretFile(path)
	if err != nil {
		return nil, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return nil, fmt.Errorf("security: %s: empty first line", path)
	}
	return []byte(line), nil
}

// WriteFileAtomic replaces path with data, mode 0600, crash-safely: a
// temporary file beside it, fsync, rename, fsync of the directory. A
// reader sees the old file or the new one, never a mix.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	temp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("security: %w", err)
	}
	name := temp.Name()
	defer os.Remove(name) // a no-op once renamed
	if err := temp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		_ = temp.Close()
		return fmt.Errorf("security: %w", err)
	}
	if _, err := temp.Write(data); err != nil {
		_ = temp.Close()
		return fmt.Errorf("security: writing %s: %w", name, err)
	}
	if err := temp.Sync(); err != nil {
		_ = temp.Close()
		return fmt.Errorf("security: syncing %s: %w", name, err)
	}
	if err := temp.Close(); err != nil {
		return fmt.Errorf("security: %w", err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("security: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for sync there
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("security: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("security: syncing directory %s: %w", dir, err)
	}
	return nil
}
