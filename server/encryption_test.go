package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/keyring"
)

func newRingFile(t *testing.T, name string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if _, err := keyring.Create(file, time.Now()); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestEncryptionKeyFileRefusals: a ring others can read, a file that is
// no ring, memory storage with a ring, and an encrypted data directory
// started without its ring or with another are each refused before the
// broker writes anything, naming --encryption-key-file.
func TestEncryptionKeyFileRefusals(t *testing.T) {
	ring, other := newRingFile(t, "data.keys"), newRingFile(t, "other.keys")
	garbage := filepath.Join(t.TempDir(), "garbage.keys")
	if err := os.WriteFile(garbage, []byte("not a ring"), 0o600); err != nil {
		t.Fatal(err)
	}
	exposed := newRingFile(t, "exposed.keys")
	if err := os.Chmod(exposed, 0o644); err != nil {
		t.Fatal(err)
	}

	encrypted := testConfig(t, nil)
	encrypted.EncryptionKeyFile = ring
	srv, err := New(encrypted)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	format, err := os.ReadFile(filepath.Join(encrypted.DataDir, "FORMAT"))
	if err != nil || !strings.Contains(string(format), `"encryption"`) {
		t.Fatalf("FORMAT of an encrypted directory: %s, %v", format, err)
	}

	cases := []struct {
		name   string
		change func(*Config)
		want   error
	}{
		{"no ring", func(c *Config) { c.DataDir, c.EncryptionKeyFile = encrypted.DataDir, "" }, ErrEncryptionKey},
		{"another ring", func(c *Config) { c.DataDir, c.EncryptionKeyFile = encrypted.DataDir, other }, ErrEncryptionKey},
		{"not a ring", func(c *Config) { c.EncryptionKeyFile = garbage }, ErrEncryptionKey},
		{"memory storage", func(c *Config) {
			c.Storage, c.DataDir, c.AcceptMemoryStorageLoss, c.MemoryStorageCap = StorageMemory, "", true, 32<<20
			c.EncryptionKeyFile = ring
		}, ErrInvalidSetting},
	}
	if runtime.GOOS != "windows" {
		cases = append(cases, struct {
			name   string
			change func(*Config)
			want   error
		}{"exposed ring", func(c *Config) { c.EncryptionKeyFile = exposed }, ErrExposedSecret})
	}
	for _, c := range cases {
		cfg := testConfig(t, nil)
		c.change(&cfg)
		srv, err := New(cfg)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "--encryption-key-file") {
			t.Errorf("%s: %v, want %v naming --encryption-key-file", c.name, err, c.want)
		}
		if srv != nil {
			t.Errorf("%s: New returned a server with its error", c.name)
		}
	}
	after, err := os.ReadFile(filepath.Join(encrypted.DataDir, "FORMAT"))
	if err != nil || string(after) != string(format) {
		t.Fatal("a refused start changed FORMAT")
	}
}
