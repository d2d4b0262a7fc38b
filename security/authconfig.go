package security

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// ErrAuthConfig reports an auth config file that cannot be used.
var ErrAuthConfig = errors.New("security: auth config")

// Scope is a permission an identity holds on some stream names. No scope
// implies another: admin does not include publish.
type Scope uint8

// Scopes.
const (
	ScopePublish Scope = iota
	ScopeSubscribe
	ScopeAdmin
	scopeCount
)

var scopeNames = [scopeCount]string{"publish", "subscribe", "admin"}

func (s Scope) String() string {
	if s < scopeCount {
		return scopeNames[s]
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// ParseScope parses "publish", "subscribe" or "admin".
func ParseScope(text string) (Scope, error) {
	for i, name := range scopeNames {
		if text == name {
			return Scope(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown scope %q (want publish, subscribe or admin)", ErrAuthConfig, text)
}

// AuthFile is the auth config as stored (TOML). Unknown keys are fatal.
//
//	[[identity]]
//	name = "orders-writer"
//	account = "acme"                  # optional; absent: the default account
//	token_sha256 = "9f86d0…"          # or password_hash, or mtls_identity
//	publish = ["orders.>"]            # patterns this scope covers; absent: not granted
//	subscribe = ["orders.*"]
//	admin = []
//	deny_publish = ["orders.audit"]   # deny patterns win over allow
//	subscribe_subjects = ["orders.eu.>"]
//	publish_messages_per_second = 1000  # optional quotas; 0 = none
//	publish_bytes_per_second = 1048576
//	expires = 2027-01-31T00:00:00Z      # optional; absent: never
//	max_connections = 10
//	max_streams = 4
//	max_partitions = 16
//	max_stored_bytes = 1073741824
//
//	[[account_quota]]                  # optional quotas of an account
//	account = "acme"                   # "" or absent: the default account
//	max_stored_bytes = 10737418240
//
//	[[group]]                          # optional consumer group ACLs (GroupRule)
//	stream = "orders.>"
//	group = "billing"
//	join = ["billing-worker"]
type AuthFile struct {
	Identities []IdentityEntry `toml:"identity"`
	Groups     []GroupRule     `toml:"group,omitempty"`
	Exports    []ExportRule    `toml:"export,omitempty"`
	Accounts   []AccountQuota  `toml:"account_quota,omitempty"`
}

// IdentityEntry is one identity: a name, exactly one credential, its
// scopes and quotas.
type IdentityEntry struct {
	Name string `toml:"name"`
	// Account is the namespace the identity's stream names live in
	// (accounts.go); empty is the default account.
	Account      string `toml:"account,omitempty"`
	TokenSHA256  string `toml:"token_sha256,omitempty"`
	PasswordHash string `toml:"password_hash,omitempty"`
	// MTLSIdentity is the client certificate's first URI SAN, else its
	// first DNS SAN.
	MTLSIdentity string   `toml:"mtls_identity,omitempty"`
	Publish      []string `toml:"publish,omitempty"`
	Subscribe    []string `toml:"subscribe,omitempty"`
	Admin        []string `toml:"admin,omitempty"`
	// PublishSubjects, when set, limits the subjects of the records the
	// identity publishes, on top of the publish scope on the stream they
	// land in: every record must carry a subject matching one of them.
	PublishSubjects []string `toml:"publish_subjects,omitempty"`
	// SubscribeSubjects, when set, limits what the identity consumes to
	// records whose subjects they cover: a Consume's subject filter must
	// lie within them.
	SubscribeSubjects []string `toml:"subscribe_subjects,omitempty"`
	// Deny patterns win over the allow patterns above: a name or subject
	// one of them matches is refused whatever grants it.
	DenyPublish           []string `toml:"deny_publish,omitempty"`
	DenySubscribe         []string `toml:"deny_subscribe,omitempty"`
	DenyAdmin             []string `toml:"deny_admin,omitempty"`
	DenyPublishSubjects   []string `toml:"deny_publish_subjects,omitempty"`
	DenySubscribeSubjects []string `toml:"deny_subscribe_subjects,omitempty"`
	// Publish quotas; 0 means none.
	PublishMessagesPerSecond float64 `toml:"publish_messages_per_second,omitempty"`
	PublishBytesPerSecond    float64 `toml:"publish_bytes_per_second,omitempty"`
	// Expires ends the credential at this instant (a TOML offset
	// date-time); zero: it never expires. From then on it is refused like
	// a wrong one, and sessions it opened are cut.
	Expires time.Time `toml:"expires,omitempty"`
	// Resource quotas (QuotaLimits); 0 means none.
	MaxConnections int64 `toml:"max_connections,omitempty"`
	MaxStreams     int64 `toml:"max_streams,omitempty"`
	MaxPartitions  int64 `toml:"max_partitions,omitempty"`
	MaxStoredBytes int64 `toml:"max_stored_bytes,omitempty"`
}

// Limits returns the entry's quotas.
func (e IdentityEntry) Limits() QuotaLimits {
	return QuotaLimits{MessagesPerSecond: e.PublishMessagesPerSecond, BytesPerSecond: e.PublishBytesPerSecond,
		Connections: e.MaxConnections, Streams: e.MaxStreams, Partitions: e.MaxPartitions, StoredBytes: e.MaxStoredBytes}
}

// Mechanism names the entry's credential kind.
func (e IdentityEntry) Mechanism() string {
	switch {
	case e.TokenSHA256 != "":
		return "token"
	case e.PasswordHash != "":
		return "password"
	case e.MTLSIdentity != "":
		return "mtls"
	}
	return "none"
}

// Patterns returns the entry's pattern list for scope (nil: not granted).
func (e IdentityEntry) Patterns(scope Scope) []string {
	switch scope {
	case ScopePublish:
		return e.Publish
	case ScopeSubscribe:
		return e.Subscribe
	case ScopeAdmin:
		return e.Admin
	}
	return nil
}

// DenyPatterns returns the entry's deny list for scope.
func (e IdentityEntry) DenyPatterns(scope Scope) []string {
	switch scope {
	case ScopePublish:
		return e.DenyPublish
	case ScopeSubscribe:
		return e.DenySubscribe
	case ScopeAdmin:
		return e.DenyAdmin
	}
	return nil
}

// Grant gives the entry scope over patterns, replacing what it had.
func (e *IdentityEntry) Grant(scope Scope, patterns []string) {
	switch scope {
	case ScopePublish:
		e.Publish = patterns
	case ScopeSubscribe:
		e.Subscribe = patterns
	case ScopeAdmin:
		e.Admin = patterns
	}
}

// Errors of editing an AuthFile.
var (
	ErrIdentityExists = errors.New("security: identity already exists")
	ErrNoIdentity     = errors.New("security: no such identity")
)

// Put adds entry, or replaces the identity of its name when replace is
// set: ErrIdentityExists when it is not.
func (f *AuthFile) Put(entry IdentityEntry, replace bool) error {
	at := slices.IndexFunc(f.Identities, func(e IdentityEntry) bool { return e.Name == entry.Name })
	switch {
	case at >= 0 && !replace:
		return fmt.Errorf("%w: %q", ErrIdentityExists, entry.Name)
	case at >= 0:
		f.Identities[at] = entry
	default:
		f.Identities = append(f.Identities, entry)
	}
	return nil
}

// Remove deletes the named identity and returns it: ErrNoIdentity when
// there is none.
func (f *AuthFile) Remove(name string) (IdentityEntry, error) {
	at := slices.IndexFunc(f.Identities, func(e IdentityEntry) bool { return e.Name == name })
	if at < 0 {
		return IdentityEntry{}, fmt.Errorf("%w: %q", ErrNoIdentity, name)
	}
	removed := f.Identities[at]
	f.Identities = slices.Delete(f.Identities, at, at+1)
	return removed, nil
}

// ParseAuthFile decodes TOML strictly: an unknown key is an error (a typo
// must not silently grant or drop a permission).
func ParseAuthFile(data []byte) (AuthFile, error) {
	var file AuthFile
	decoder := toml.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&file); err != nil {
		var strict *toml.StrictMissingError
		if errors.As(err, &strict) {
			return AuthFile{}, fmt.Errorf("%w: unknown key: %s", ErrAuthConfig, strict.String())
		}
		return AuthFile{}, fmt.Errorf("%w: %w", ErrAuthConfig, err)
	}
	if _, err := compile(file); err != nil {
		return AuthFile{}, err
	}
	return file, nil
}

// LoadAuthFile reads and checks an auth config; the file must not be
// group- or world-readable.
func LoadAuthFile(path string) (AuthFile, error) {
	data, err := ReadSecretFile(path)
	if err != nil {
		return AuthFile{}, err
	}
	file, err := ParseAuthFile(data)
	if err != nil {
		return AuthFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return file, nil
}

// SaveAuthFile writes the file atomically with mode 0600.
func SaveAuthFile(path string, file AuthFile) error {
	if _, err := compile(file); err != nil {
		return err
	}
	header := "# IronBus auth config (docs/SECURITY.md). Edit with `ironbus auth`; keep it mode 0600.\n"
	return WriteFileAtomic(path, append([]byte(header), encodeAuthFile(file)...))
}

// Identity is a compiled identity of one snapshot of the auth config.
type Identity struct {
	Name      string
	Mechanism string
	account   string               // DefaultAccount, OperatorAccount or a tenant's name
	granted   [scopeCount]Patterns // nil: scope not granted
	denied    [scopeCount]Patterns // win over granted
	subjects  subjectRules
	token     [sha256.Size]byte
	password  passwordHash
	mtls      string
	limits    QuotaLimits
	shared    QuotaLimits // its account's
	storage   bool        // it or its account has a stream, partition or stored-bytes quota
	// credential is the secret's stored form (digest, hash or mtls
	// identity): a session outlives a reload only while it is unchanged.
	credential string
	expires    time.Time // zero: never
	snapshot   *authSnapshot
}

// Expires is when the identity's credential ends (zero: never).
func (id *Identity) Expires() time.Time { return id.expires }

// expiredAt reports whether the credential has ended by now.
func (id *Identity) expiredAt(now time.Time) bool {
	return !id.expires.IsZero() && !now.Before(id.expires)
}

// Account is the account the identity belongs to: DefaultAccount,
// OperatorAccount or a tenant's name. Account quotas (AccountQuota) are
// kept per this name.
func (id *Identity) Account() string { return id.account }

// Allowed reports whether the identity holds scope on name (a stream):
// an allow pattern matches it and no deny pattern does.
func (id *Identity) Allowed(scope Scope, name string) bool {
	return scope < scopeCount && id.granted[scope].Match(name) && !id.denied[scope].Match(name)
}

// Limits returns the identity's own quotas.
func (id *Identity) Limits() QuotaLimits { return id.limits }

// authSnapshot is one immutable version of the auth config.
type authSnapshot struct {
	byName   map[string]*Identity
	tokens   []*Identity
	byMTLS   map[string]*Identity
	identity []*Identity
	groups   []groupRule
	exports  map[exportKey]bool
	accounts map[string]QuotaLimits // account_quota by account name
	// stored: some identity or account has max_stored_bytes, so records
	// are counted (ChargeStored).
	stored bool
	// dummy is hashed when the username is unknown, so an unknown user
	// costs what a wrong password costs: the parameters of the most
	// expensive real hash, a key nothing matches.
	dummy passwordHash
	// slowest is the longest password verification seen with this
	// config, in nanoseconds (Authorizer.SlowestCheck).
	slowest atomic.Int64
}

// noteCheck keeps the longest verification time.
func (s *authSnapshot) noteCheck(elapsed time.Duration) {
	for {
		old := s.slowest.Load()
		if int64(elapsed) <= old || s.slowest.CompareAndSwap(old, int64(elapsed)) {
			return
		}
	}
}

// costlier orders hash parameters by the work a verification does.
func costlier(a, b Argon2idParams) bool {
	workA, workB := uint64(a.MemoryKiB)*uint64(a.Iterations), uint64(b.MemoryKiB)*uint64(b.Iterations)
	if workA != workB {
		return workA > workB
	}
	return a.Parallelism < b.Parallelism // fewer lanes: less of it runs at once
}

// compile validates a file and builds its snapshot.
func compile(file AuthFile) (*authSnapshot, error) {
	groups, err := compileGroupRules(file.Groups)
	if err != nil {
		return nil, err
	}
	exports, err := compileExports(file.Exports)
	if err != nil {
		return nil, err
	}
	accounts, err := compileAccountQuotas(file.Accounts)
	if err != nil {
		return nil, err
	}
	snap := &authSnapshot{byName: map[string]*Identity{}, byMTLS: map[string]*Identity{}, groups: groups, exports: exports,
		accounts: accounts}
	for i, entry := range file.Identities {
		id, err := compileIdentity(entry)
		if err != nil {
			return nil, fmt.Errorf("%w: identity %d (%q): %w", ErrAuthConfig, i+1, entry.Name, err)
		}
		if _, dup := snap.byName[id.Name]; dup {
			return nil, fmt.Errorf("%w: identity %q is defined twice", ErrAuthConfig, id.Name)
		}
		id.snapshot = snap
		id.shared = accounts[id.Account()]
		id.storage = id.storage || id.shared.storage()
		snap.stored = snap.stored || id.limits.StoredBytes > 0 || id.shared.StoredBytes > 0
		snap.byName[id.Name] = id
		snap.identity = append(snap.identity, id)
		switch id.Mechanism {
		case "token":
			snap.tokens = append(snap.tokens, id)
		case "password":
			if snap.dummy.key == nil || costlier(id.password.params, snap.dummy.params) {
				snap.dummy = passwordHash{params: id.password.params, salt: make([]byte, saltBytes), key: make([]byte, keyBytes)}
			}
		case "mtls":
			if other, dup := snap.byMTLS[id.mtls]; dup {
				return nil, fmt.Errorf("%w: identities %q and %q share mtls_identity %q", ErrAuthConfig, other.Name, id.Name, id.mtls)
			}
			snap.byMTLS[id.mtls] = id
		}
	}
	return snap, nil
}

func compileIdentity(entry IdentityEntry) (*Identity, error) {
	if !validIdentityName(entry.Name) {
		return nil, errBadIdentityName
	}
	set := 0
	for _, credential := range []string{entry.TokenSHA256, entry.PasswordHash, entry.MTLSIdentity} {
		if credential != "" {
			set++
		}
	}
	if set != 1 {
		return nil, errors.New("set exactly one of token_sha256, password_hash, mtls_identity")
	}
	account, err := accountOf(entry.Account)
	if err != nil {
		return nil, err
	}
	id := &Identity{Name: entry.Name, Mechanism: entry.Mechanism(), mtls: entry.MTLSIdentity, account: account, expires: entry.Expires,
		credential: entry.TokenSHA256 + entry.PasswordHash + entry.MTLSIdentity, limits: entry.Limits()}
	if entry.TokenSHA256 != "" {
		digest, err := hex.DecodeString(entry.TokenSHA256)
		if err != nil || len(digest) != sha256.Size {
			return nil, errors.New("token_sha256 must be 64 hex digits (ironbus auth add --token-file writes it)")
		}
		copy(id.token[:], digest)
	}
	if entry.PasswordHash != "" {
		hash, err := parsePasswordHash(entry.PasswordHash)
		if err != nil {
			return nil, err
		}
		id.password = hash
	}
	if err := id.limits.validate(); err != nil {
		return nil, err
	}
	id.storage = id.limits.storage()
	for scope := range scopeCount {
		var err error
		if id.granted[scope], err = optionalPatterns(scope.String(), entry.Patterns(scope)); err != nil {
			return nil, err
		}
		if id.denied[scope], err = optionalPatterns("deny_"+scope.String(), entry.DenyPatterns(scope)); err != nil {
			return nil, err
		}
	}
	subjects, err := compileSubjectRules(entry)
	if err != nil {
		return nil, err
	}
	id.subjects = subjects
	return id, nil
}

// optionalPatterns compiles a pattern list of the file: nil stays nil
// (the key is absent).
func optionalPatterns(key string, texts []string) (Patterns, error) {
	if texts == nil {
		return nil, nil
	}
	patterns, err := ParsePatterns(texts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return slices.Clip(patterns), nil
}

func validIdentityName(name string) bool {
	return name != "" && !strings.ContainsAny(name, " \t\r\n") && len(name) <= 256
}

// ReadAuthFileOrEmpty is LoadAuthFile that treats a missing file as empty
// (for `ironbus auth add` creating the first identity).
func ReadAuthFileOrEmpty(path string) (AuthFile, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return AuthFile{}, nil
	}
	return LoadAuthFile(path)
}

// PasswordMemory is the memory one password verification takes with the
// most expensive hash of the file (0 without passwords): the broker
// verifies one at a time, so this is what its RAM budget needs.
func PasswordMemory(file AuthFile) int64 {
	var most int64
	for _, entry := range file.Identities {
		if entry.PasswordHash == "" {
			continue
		}
		if hash, err := parsePasswordHash(entry.PasswordHash); err == nil {
			most = max(most, int64(hash.params.MemoryKiB)<<10)
		}
	}
	return most
}

// TLSConnectionMemory estimates what crypto/tls holds per connection: a
// maximum-size record being read and one being written, with overhead.
const TLSConnectionMemory = 40 << 10
