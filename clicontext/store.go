package clicontext

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// Schema names the version of contexts.json.
const Schema = "ironbus.contexts.v1"

// EnvConfigDir overrides the directory of contexts.json.
const EnvConfigDir = "IRONBUS_CONFIG_DIR"

const fileName = "contexts.json"

// Sentinel errors; every error of this package wraps one of them.
var (
	ErrNotFound       = errors.New("clicontext: no such context")
	ErrExists         = errors.New("clicontext: context already exists")
	ErrInvalidName    = errors.New("clicontext: invalid context name")
	ErrInsecureSecret = errors.New("clicontext: secret file is readable by others")
	ErrCorrupt        = errors.New("clicontext: contexts file is unreadable")
	ErrConflict       = errors.New("clicontext: conflicting settings")
)

// Context is one named set of defaults.
type Context struct {
	Name string `json:"name"`
	// Addr is the broker's client address, or a cluster's seed list of
	// them separated by commas ("a:7001,b:7001,c:7001"): it is handed to
	// --addr, and so to client.Dial, as it is.
	Addr      string `json:"addr,omitempty"`
	TokenFile string `json:"token_file,omitempty"`
	DataDir   string `json:"data_dir,omitempty"`

	// How to reach a secured broker at Addr: TLS and the other
	// credentials. Paths only, never a secret; added fields, so an older
	// contexts.json still reads as the same schema.
	TLSCA         string `json:"tls_ca,omitempty"`
	TLSCert       string `json:"tls_cert,omitempty"`
	TLSKey        string `json:"tls_key,omitempty"`
	TLSServerName string `json:"tls_server_name,omitempty"`
	User          string `json:"user,omitempty"`
	PasswordFile  string `json:"password_file,omitempty"`

	// The broker's health endpoints, for top, report and server: where
	// they answer and the bearer token file they want (serve
	// --health-token-file).
	HealthAddr      string `json:"health_addr,omitempty"`
	HealthTokenFile string `json:"health_token_file,omitempty"`
}

// SecretFiles are the context's files that hold secrets (tokens,
// password, private key): each must pass CheckSecretFile.
func (c Context) SecretFiles() []string {
	var files []string
	for _, path := range []string{c.TokenFile, c.PasswordFile, c.TLSKey, c.HealthTokenFile} {
		if path != "" {
			files = append(files, path)
		}
	}
	return files
}

// CheckSecrets runs CheckSecretFile on every secret file of the context.
func (c Context) CheckSecrets() error {
	for _, path := range c.SecretFiles() {
		if err := CheckSecretFile(path); err != nil {
			return err
		}
	}
	return nil
}

// validate refuses what a client verb would refuse at every use: two
// kinds of credentials, or one half of a pair.
func (c Context) validate() error {
	switch {
	case c.TokenFile != "" && (c.User != "" || c.PasswordFile != ""):
		return fmt.Errorf("%w: a token file or a user with a password file, not both", ErrConflict)
	case (c.User == "") != (c.PasswordFile == ""):
		return fmt.Errorf("%w: a user and a password file go together", ErrConflict)
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return fmt.Errorf("%w: a client certificate and its key go together", ErrConflict)
	}
	return nil
}

// document is the file's content.
type document struct {
	Schema   string    `json:"schema"`
	Current  string    `json:"current"`
	Contexts []Context `json:"contexts"`
}

// Store reads and writes contexts.json in one directory.
type Store struct {
	dir string
}

// DefaultDir is EnvConfigDir when set (getenv is os.Getenv outside tests),
// else os.UserConfigDir()/ironbus.
func DefaultDir(getenv func(string) string) (string, error) {
	if dir := getenv(EnvConfigDir); dir != "" {
		return dir, nil
	}
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("clicontext: no config directory (set %s): %w", EnvConfigDir, err)
	}
	return filepath.Join(base, "ironbus"), nil
}

// NewStore returns the store in dir; nothing is read or created yet.
func NewStore(dir string) *Store { return &Store{dir: dir} }

// Path is the file the store keeps its contexts in.
func (s *Store) Path() string { return filepath.Join(s.dir, fileName) }

func (s *Store) load() (document, error) {
	doc := document{Schema: Schema}
	data, err := os.ReadFile(s.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return doc, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return doc, fmt.Errorf("%w: %s: %w", ErrCorrupt, s.Path(), err)
	}
	if doc.Schema != Schema {
		return doc, fmt.Errorf("%w: %s has schema %q, this binary reads %q", ErrCorrupt, s.Path(), doc.Schema, Schema)
	}
	return doc, nil
}

// List returns every context, sorted by name, and the current one's name
// ("" when none is current).
func (s *Store) List() ([]Context, string, error) {
	doc, err := s.load()
	// sort.Slice: one sort for every element type, where slices.SortFunc
	// links a copy per struct type (docs/PACKAGING.md).
	sort.Slice(doc.Contexts, func(i, j int) bool { return doc.Contexts[i].Name < doc.Contexts[j].Name })
	return doc.Contexts, doc.Current, err
}

// Current returns the current context; ok is false when none is set.
func (s *Store) Current() (Context, bool, error) {
	doc, err := s.load()
	if err != nil || doc.Current == "" {
		return Context{}, false, err
	}
	if i := doc.find(doc.Current); i >= 0 {
		return doc.Contexts[i], true, nil
	}
	return Context{}, false, fmt.Errorf("%w: the current context %q is not in %s", ErrNotFound, doc.Current, s.Path())
}

func (d *document) find(name string) int {
	return slices.IndexFunc(d.Contexts, func(c Context) bool { return c.Name == name })
}

// Create stores c, replacing a context of the same name only when
// replace is set. Paths are made absolute; every secret file (token,
// password, private key) must pass CheckSecretFile.
func (s *Store) Create(c Context, replace bool) (Context, error) {
	if err := ValidateName(c.Name); err != nil {
		return c, err
	}
	if err := c.validate(); err != nil {
		return c, err
	}
	for _, path := range []*string{&c.TokenFile, &c.DataDir, &c.TLSCA, &c.TLSCert, &c.TLSKey, &c.PasswordFile, &c.HealthTokenFile} {
		var err error
		if *path, err = absolute(*path); err != nil {
			return c, err
		}
	}
	if err := c.CheckSecrets(); err != nil {
		return c, err
	}
	doc, err := s.load()
	if err != nil {
		return c, err
	}
	if i := doc.find(c.Name); i >= 0 {
		if !replace {
			return c, fmt.Errorf("%w: %q", ErrExists, c.Name)
		}
		doc.Contexts[i] = c
	} else {
		doc.Contexts = append(doc.Contexts, c)
	}
	return c, s.save(doc)
}

// Use makes name the current context.
func (s *Store) Use(name string) error {
	doc, err := s.load()
	if err != nil {
		return err
	}
	if doc.find(name) < 0 {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	doc.Current = name
	return s.save(doc)
}

func absolute(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("clicontext: %s: %w", path, err)
	}
	return abs, nil
}

// ValidateName accepts 1 to 64 characters of letters, digits, '.', '_'
// and '-': a name that is safe in a shell prompt and a file name.
func ValidateName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%w: %q must be 1 to 64 characters", ErrInvalidName, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%w: %q may hold only letters, digits, '.', '_' and '-'", ErrInvalidName, name)
		}
	}
	return nil
}

// save replaces the file atomically: a crash leaves the old or the new
// contexts, never a torn file.
func (s *Store) save(doc document) error {
	doc.Schema = Schema
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("clicontext: encode: %w", err)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("clicontext: %w", err)
	}
	temp, err := os.CreateTemp(s.dir, fileName+".tmp-*")
	if err != nil {
		return fmt.Errorf("clicontext: %w", err)
	}
	defer os.Remove(temp.Name()) // after the rename, there is nothing to remove
	if err := temp.Chmod(0o600); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		temp.Close()
		return fmt.Errorf("clicontext: %w", err)
	}
	_, err = temp.Write(append(data, '\n'))
	if err == nil {
		err = temp.Sync()
	}
	if closeErr := temp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(temp.Name(), s.Path())
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("clicontext: writing %s: %w", s.Path(), err)
	}
	return nil
}
