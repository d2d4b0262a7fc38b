package security

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Quotas. An identity's quotas (the max_* and publish_* keys of its
// [[identity]] table) and its account's ([[account_quota]]) are two
// separate limits, both checked: whichever is reached first refuses. Each
// quota is kept per name, so every connection of an identity shares it.
//
// Connections are counted while they are open. Streams, partitions and
// stored bytes are counted from the broker's streams (StreamUsage), each
// stream charged to the identity that created it and to its account, so
// a restart recounts them from the data directory. A stream is charged
// its preallocated segments from its creation on. The publish rates are
// token buckets, one second deep.

// ErrQuotaExceeded reports a request refused because a quota is reached.
var ErrQuotaExceeded = errors.New("security: quota exceeded")

// ResourceRetryAfter is the retry hint of a refusal by a connection,
// stream, partition or stored-bytes quota: such a quota frees up only
// when something is closed, removed or trimmed by retention, so the hint
// is the interval at which stored bytes are recounted.
const ResourceRetryAfter = time.Second

// QuotaLimits are the quotas of an identity or an account; zero fields
// mean none.
type QuotaLimits struct {
	MessagesPerSecond float64
	BytesPerSecond    float64
	Connections       int64
	Streams           int64
	Partitions        int64
	StoredBytes       int64 // preallocated segments included
}

func (l QuotaLimits) validate() error {
	if l.MessagesPerSecond < 0 || l.BytesPerSecond < 0 || l.Connections < 0 || l.Streams < 0 || l.Partitions < 0 || l.StoredBytes < 0 {
		return errors.New("quotas must not be negative")
	}
	return nil
}

func (l QuotaLimits) rated() bool { return l.MessagesPerSecond > 0 || l.BytesPerSecond > 0 }

func (l QuotaLimits) storage() bool { return l.Streams > 0 || l.Partitions > 0 || l.StoredBytes > 0 }

// AccountQuota is one [[account_quota]] table: the quotas every identity
// of the account shares.
type AccountQuota struct {
	Account                  string  `toml:"account"`
	PublishMessagesPerSecond float64 `toml:"publish_messages_per_second,omitempty"`
	PublishBytesPerSecond    float64 `toml:"publish_bytes_per_second,omitempty"`
	MaxConnections           int64   `toml:"max_connections,omitempty"`
	MaxStreams               int64   `toml:"max_streams,omitempty"`
	MaxPartitions            int64   `toml:"max_partitions,omitempty"`
	MaxStoredBytes           int64   `toml:"max_stored_bytes,omitempty"`
}

// Limits returns the account's quotas.
func (a AccountQuota) Limits() QuotaLimits {
	return QuotaLimits{MessagesPerSecond: a.PublishMessagesPerSecond, BytesPerSecond: a.PublishBytesPerSecond,
		Connections: a.MaxConnections, Streams: a.MaxStreams, Partitions: a.MaxPartitions, StoredBytes: a.MaxStoredBytes}
}

func compileAccountQuotas(entries []AccountQuota) (map[string]QuotaLimits, error) {
	out := make(map[string]QuotaLimits, len(entries))
	for i, entry := range entries {
		account, err := accountOf(entry.Account) // "" is the default account, as for identities
		if err != nil {
			return nil, fmt.Errorf("%w: account_quota %d: %w", ErrAuthConfig, i+1, err)
		}
		if _, dup := out[account]; dup {
			return nil, fmt.Errorf("%w: account_quota %d: account %q has quotas twice", ErrAuthConfig, i+1, account)
		}
		if err := entry.Limits().validate(); err != nil {
			return nil, fmt.Errorf("%w: account_quota %d (%q): %w", ErrAuthConfig, i+1, account, err)
		}
		out[account] = entry.Limits()
	}
	return out, nil
}

// QuotaError is a refusal by a quota: which holder's, which quota, and
// when to retry.
type QuotaError struct {
	Holder     string // `identity "name"` or `account "name"`
	Quota      string // the auth config key
	Limit      int64
	RetryAfter time.Duration
	Detail     string
}

func (e *QuotaError) Error() string {
	text := fmt.Sprintf("%s is at its %s quota", e.Holder, e.Quota)
	if e.Limit > 0 {
		text += fmt.Sprintf(" (%d)", e.Limit)
	}
	if e.Detail != "" {
		text += ": " + e.Detail
	}
	return fmt.Sprintf("%s; retry after %v", text, e.RetryAfter)
}

func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

func identityHolder(id *Identity) string { return fmt.Sprintf("identity %q", id.Name) }

func accountHolder(account string) string {
	if account == "" || account == DefaultAccount {
		return "the default account"
	}
	return fmt.Sprintf("account %q", account)
}

// accountLimits returns the quotas of the identity's account.
func (id *Identity) accountLimits() QuotaLimits { return id.shared }

// quotaState is the Authorizer's live quota state: publish buckets and
// open connections per identity and per account, and the stored-bytes
// count. Its maps hold only names that have a bucket, an open connection
// or a stream, so it is bounded by the config, the connections and the
// streams.
type quotaState struct {
	mu             sync.Mutex
	identityBucket map[string]*QuotaBucket
	accountBucket  map[string]*QuotaBucket
	identityConns  map[string]int64
	accountConns   map[string]int64
	stored         storedCount
}

func newQuotaState() quotaState {
	return quotaState{identityBucket: map[string]*QuotaBucket{}, accountBucket: map[string]*QuotaBucket{},
		identityConns: map[string]int64{}, accountConns: map[string]int64{}}
}

// forget drops the buckets of identities and accounts the config in
// force has no rate quota for, so reloads that churn names do not grow
// the state. A connection still holding a dropped bucket keeps charging
// it until its next request looks its identity up again.
func (q *quotaState) forget(snap *authSnapshot) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for name := range q.identityBucket {
		if id := snap.byName[name]; id == nil || !id.limits.rated() {
			delete(q.identityBucket, name)
		}
	}
	for account := range q.accountBucket {
		if !snap.accounts[account].rated() {
			delete(q.accountBucket, account)
		}
	}
}

// PublishQuota is the publish rate quota a connection charges: its
// identity's bucket and its account's, either nil when it has none.
type PublishQuota struct {
	identity, account       *QuotaBucket
	identityName, accountID string
}

// PublishQuota returns the identity's publish quota, or nil when neither
// it nor its account has one. Buckets are kept per name across reloads
// (a new rate applies at once, the tokens already spent stay spent).
func (a *Authorizer) PublishQuota(id *Identity) *PublishQuota {
	own, shared := id.limits, id.accountLimits()
	if !own.rated() && !shared.rated() {
		return nil
	}
	q := &a.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	quota := &PublishQuota{identityName: id.Name, accountID: id.Account()}
	if own.rated() {
		quota.identity = bucketFor(q.identityBucket, id.Name, own, a.now)
	}
	if shared.rated() {
		quota.account = bucketFor(q.accountBucket, id.Account(), shared, a.now)
	}
	return quota
}

func bucketFor(buckets map[string]*QuotaBucket, name string, limits QuotaLimits, now func() time.Time) *QuotaBucket {
	bucket, ok := buckets[name]
	if !ok {
		bucket = newQuotaBucket(now)
		buckets[name] = bucket
	}
	bucket.setRates(limits)
	return bucket
}

// Take spends one record of size bytes from both buckets, or spends
// nothing and returns the refusal of the one without room. The identity's
// bucket is locked before the account's, always.
func (p *PublishQuota) Take(size int) *QuotaError {
	if p.identity != nil {
		p.identity.mu.Lock()
		defer p.identity.mu.Unlock()
		if wait := p.identity.waitLocked(size); wait > 0 {
			return &QuotaError{Holder: fmt.Sprintf("identity %q", p.identityName), Quota: "publish rate", RetryAfter: wait}
		}
	}
	if p.account != nil {
		p.account.mu.Lock()
		defer p.account.mu.Unlock()
		if wait := p.account.waitLocked(size); wait > 0 {
			return &QuotaError{Holder: accountHolder(p.accountID), Quota: "publish rate", RetryAfter: wait}
		}
		p.account.spendLocked(size)
	}
	if p.identity != nil {
		p.identity.spendLocked(size)
	}
	return nil
}

// Connection is one counted open connection; Release gives it back.
type Connection struct {
	state             *quotaState
	identity, account string
}

// Connect counts an authenticated connection of id against its and its
// account's max_connections; a *QuotaError when either is reached.
func (a *Authorizer) Connect(id *Identity) (*Connection, error) {
	q := &a.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	own, shared := id.limits.Connections, id.accountLimits().Connections
	if own > 0 && q.identityConns[id.Name] >= own {
		return nil, &QuotaError{Holder: identityHolder(id), Quota: "max_connections", Limit: own, RetryAfter: ResourceRetryAfter}
	}
	if shared > 0 && q.accountConns[id.Account()] >= shared {
		return nil, &QuotaError{Holder: accountHolder(id.Account()), Quota: "max_connections", Limit: shared, RetryAfter: ResourceRetryAfter}
	}
	q.identityConns[id.Name]++
	q.accountConns[id.Account()]++
	return &Connection{state: q, identity: id.Name, account: id.Account()}, nil
}

// Release uncounts the connection, once; a nil Connection is a no-op.
// One goroutine: the connection's.
func (c *Connection) Release() {
	if c == nil || c.state == nil {
		return
	}
	q := c.state
	q.mu.Lock()
	defer q.mu.Unlock()
	uncount(q.identityConns, c.identity)
	uncount(q.accountConns, c.account)
	c.state = nil
}

func uncount(counts map[string]int64, name string) {
	if counts[name] <= 1 {
		delete(counts, name)
		return
	}
	counts[name]--
}
