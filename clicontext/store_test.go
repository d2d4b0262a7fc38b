package clicontext

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestCreateUseList(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config")
	store := NewStore(dir)
	if _, ok, err := store.Current(); ok || err != nil {
		t.Fatalf("empty store: current %v %v", ok, err)
	}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	created, err := store.Create(Context{Name: "pi", Addr: "10.0.0.7:7777", TokenFile: token, DataDir: "data"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(created.DataDir) {
		t.Errorf("data dir %q stored relative", created.DataDir)
	}
	if _, err := store.Create(Context{Name: "pi"}, false); !errors.Is(err, ErrExists) {
		t.Errorf("second create: %v, want ErrExists", err)
	}
	if err := store.Use("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("use of a missing context: %v", err)
	}
	if err := store.Use("pi"); err != nil {
		t.Fatal(err)
	}
	current, ok, err := store.Current()
	if err != nil || !ok || current.Addr != "10.0.0.7:7777" {
		t.Fatalf("current: %+v %v %v", current, ok, err)
	}
	info, err := os.Stat(store.Path())
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm() != 0o600 {
		t.Errorf("contexts file mode %04o, want 0600", info.Mode().Perm())
	}
	if _, err := store.Create(Context{Name: "bad name"}, false); !errors.Is(err, ErrInvalidName) {
		t.Errorf("a name with a space: %v", err)
	}
}

func TestLooseTokenFileRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("mode bits do not reflect Windows ACLs")
	}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := NewStore(t.TempDir()).Create(Context{Name: "x", TokenFile: token}, false)
	if !errors.Is(err, ErrInsecureSecret) {
		t.Fatalf("a 0644 token file: %v, want ErrInsecureSecret", err)
	}
}

func TestCorruptFileIsTypedError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, fileName), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := NewStore(dir).List(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a torn contexts file: %v, want ErrCorrupt", err)
	}
}

func TestCreateKeepsTLSAndCredentialsConsistent(t *testing.T) {
	store := NewStore(filepath.Join(t.TempDir(), "config"))
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	conflicting := []Context{
		{Name: "a", TokenFile: secret, User: "ops", PasswordFile: secret},
		{Name: "b", User: "ops"},
		{Name: "c", PasswordFile: secret},
		{Name: "d", TLSCert: "client.crt"},
	}
	for _, c := range conflicting {
		if _, err := store.Create(c, false); !errors.Is(err, ErrConflict) {
			t.Errorf("%+v: %v, want ErrConflict", c, err)
		}
	}
	created, err := store.Create(Context{Name: "tls", TLSCA: "ca.crt", TLSCert: "c.crt", TLSKey: secret, User: "ops", PasswordFile: secret}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(created.TLSCA) || !filepath.IsAbs(created.TLSCert) {
		t.Errorf("TLS paths stored relative: %+v", created)
	}
	if got := created.SecretFiles(); len(got) != 2 {
		t.Errorf("secret files %q, want the password and the key", got)
	}
}

func TestSeedListKeptAsGiven(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config")
	store := NewStore(dir)
	seeds := "10.0.0.7:7001,10.0.0.8:7001,10.0.0.9:7001"
	if _, err := store.Create(Context{Name: "edge", Addr: seeds}, false); err != nil {
		t.Fatal(err)
	}
	if err := store.Use("edge"); err != nil {
		t.Fatal(err)
	}
	current, ok, err := NewStore(dir).Current() // read back from the file
	if err != nil || !ok || current.Addr != seeds {
		t.Fatalf("current: %+v %v %v, want the seed list kept whole", current, ok, err)
	}
}
