package security

import (
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// Sentinel errors of the pre-auth gate.
var (
	ErrHalfOpenFull = errors.New("security: too many connections waiting to authenticate")
	// ErrSourceHalfOpenFull is ErrHalfOpenFull for one source IP.
	ErrSourceHalfOpenFull = errors.New("security: too many connections from this source waiting to authenticate")
	ErrRateLimited        = errors.New("security: connection rate limit for this source")
)

// GateOptions are the pre-authentication limits. Zero fields take the
// defaults below; negative ones turn that limit off.
type GateOptions struct {
	// MaxHalfOpen bounds connections accepted but not yet authenticated
	// (64): a handshake flood cannot take every slot. When the table is
	// full the oldest of them is evicted to admit a new one.
	MaxHalfOpen int
	// MaxHalfOpenPerSource bounds them per source IP (32, half the
	// table): at its cap a source's new connection evicts that source's
	// own oldest, so one source's flood never evicts another's and other
	// sources always have the rest of the table. Loopback peers count as
	// one source like any other.
	MaxHalfOpenPerSource int
	// ConnectionsPerSecond and ConnectionBurst rate-limit new connections
	// per source IP (20/s, burst 40).
	ConnectionsPerSecond float64
	ConnectionBurst      float64
	// RateLimitLoopback applies the connection rate to loopback peers too.
	// Off by default: local processes (tests, bench, sidecars) open many
	// connections, and a local attacker has easier ways in.
	RateLimitLoopback bool
	// LockoutAfter failed authentications of one account from one source
	// lock that account out for that source (5); each further lockout
	// doubles, from LockoutBase (1 s) up to LockoutMax (5 min). A
	// success clears the pair. Other accounts from the same source, and
	// the same account from other sources, are not affected
	// (LockoutAccount, docs/SECURITY.md).
	LockoutAfter int
	LockoutBase  time.Duration
	LockoutMax   time.Duration
	// FailureDelay is waited before answering any failed authentication
	// (500 ms): brute force gets slow, and timing says nothing.
	FailureDelay time.Duration
	// Sources bounds the per-source table and the per-(source, account)
	// table (4,096 entries each): the least recently seen are forgotten
	// first, accounts locked out last (I8).
	Sources int
	// Now is the clock (time.Now; its monotonic reading is what counts).
	Now func() time.Time
}

// Defaults of the gate.
const (
	DefaultMaxHalfOpen          = 64
	DefaultMaxHalfOpenPerSource = 32
	DefaultConnectionsPerSecond = 20
	DefaultConnectionBurst      = 40
	DefaultLockoutAfter         = 5
	DefaultLockoutBase          = time.Second
	DefaultLockoutMax           = 5 * time.Minute
	DefaultFailureDelay         = 500 * time.Millisecond
	DefaultSources              = 4096
)

func (o GateOptions) withDefaults() GateOptions {
	if o.MaxHalfOpen == 0 {
		o.MaxHalfOpen = DefaultMaxHalfOpen
	}
	if o.MaxHalfOpenPerSource == 0 {
		o.MaxHalfOpenPerSource = DefaultMaxHalfOpenPerSource
	}
	if o.ConnectionsPerSecond == 0 {
		o.ConnectionsPerSecond = DefaultConnectionsPerSecond
	}
	if o.ConnectionBurst <= 0 {
		o.ConnectionBurst = max(DefaultConnectionBurst, o.ConnectionsPerSecond)
	}
	if o.LockoutAfter == 0 {
		o.LockoutAfter = DefaultLockoutAfter
	}
	if o.LockoutBase <= 0 {
		o.LockoutBase = DefaultLockoutBase
	}
	if o.LockoutMax < o.LockoutBase {
		o.LockoutMax = max(DefaultLockoutMax, o.LockoutBase)
	}
	if o.FailureDelay == 0 {
		o.FailureDelay = DefaultFailureDelay
	}
	if o.Sources <= 0 {
		o.Sources = DefaultSources
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Gate applies the pre-authentication limits. Safe for concurrent use.
type Gate struct {
	options  GateOptions
	mu       sync.Mutex
	halfOpen halfOpenTable
	sources  map[string]*source
	accounts map[accountKey]*failures
}

type source struct {
	tokens   float64
	refilled time.Time
	seen     time.Time
}

// accountKey is what failed authentications count against: one account
// tried from one source IP.
type accountKey struct {
	ip      string
	account string
}

type failures struct {
	count       int
	lockouts    int
	lockedUntil time.Time
	seen        time.Time
}

// NewGate returns a gate with options (defaults for zero fields).
func NewGate(options GateOptions) *Gate {
	return &Gate{options: options.withDefaults(), halfOpen: newHalfOpenTable(), sources: map[string]*source{},
		accounts: map[accountKey]*failures{}}
}

// LockoutAccount names the account an authentication attempt counts
// against, with its source: the username a password login claims; for a
// token, its digest (a client with a stale token locks out only that
// token; tokens carry 256 bits, so there is nothing to guess one by one);
// for a client certificate, its identity.
func LockoutAccount(credentials wire.Credentials, peerIdentity string) string {
	switch credentials.Mechanism {
	case wire.AuthPassword:
		return "password:" + credentials.Username
	case wire.AuthToken:
		return "token:" + TokenDigest(string(credentials.Token))[:16]
	}
	return "mtls:" + peerIdentity
}

// Options returns the options in force, defaults filled in.
func (g *Gate) Options() GateOptions { return g.options }

// SourceOf extracts the IP of a "host:port" peer address.
func SourceOf(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return host
}

// Admit takes a half-open slot and a connection token for the source.
// When the source or the whole table is at its cap, the oldest
// connection there is evicted to make room: evict is how the gate ends a
// connection, called under the gate's lock, so it must not block or call
// back into the gate; it returns false when the connection cannot be
// evicted now (nil: never). On success the caller must Release the
// admission once (authenticated or gone).
func (g *Gate) Admit(remote string, evict func() bool) (*Admission, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ip := SourceOf(remote)
	if g.options.ConnectionsPerSecond > 0 && (g.options.RateLimitLoopback || !isLoopback(ip)) {
		s := g.sourceLocked(ip)
		now := g.options.Now()
		s.tokens = min(g.options.ConnectionBurst, s.tokens+now.Sub(s.refilled).Seconds()*g.options.ConnectionsPerSecond)
		s.refilled = now
		if s.tokens < 1 {
			return nil, fmt.Errorf("%w (%.0f/s)", ErrRateLimited, g.options.ConnectionsPerSecond)
		}
		s.tokens--
	}
	table := &g.halfOpen
	if limit := g.options.MaxHalfOpenPerSource; limit > 0 && table.sourceCount(ip) >= limit && !table.evictOldest(table.bySource[ip]) {
		return nil, fmt.Errorf("%w (%d)", ErrSourceHalfOpenFull, limit)
	}
	if limit := g.options.MaxHalfOpen; limit > 0 && table.all.Len() >= limit && !table.evictOldest(table.all) {
		return nil, fmt.Errorf("%w (%d)", ErrHalfOpenFull, limit)
	}
	a := &Admission{gate: g, source: ip, evict: evict}
	table.add(a)
	return a, nil
}

func isLoopback(ip string) bool {
	parsed := net.ParseIP(ip)
	return parsed != nil && parsed.IsLoopback()
}

// HalfOpen is the number of connections not yet authenticated.
func (g *Gate) HalfOpen() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.halfOpen.all.Len()
}

// LockedOut reports whether account may not authenticate from the
// source now.
func (g *Gate) LockedOut(remote, account string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	f, ok := g.accounts[accountKey{SourceOf(remote), account}]
	return ok && g.options.Now().Before(f.lockedUntil)
}

// Failed records a failed authentication of account from the source.
// The caller answers it after FailureDelay (Options).
func (g *Gate) Failed(remote, account string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.accountLocked(accountKey{SourceOf(remote), account})
	f.count++
	if g.options.LockoutAfter > 0 && f.count >= g.options.LockoutAfter {
		lockout := min(g.options.LockoutBase<<min(f.lockouts, 20), g.options.LockoutMax)
		f.lockedUntil = g.options.Now().Add(lockout)
		f.lockouts++
		f.count = 0
	}
}

// Succeeded clears the failures of account from the source.
func (g *Gate) Succeeded(remote, account string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.accounts, accountKey{SourceOf(remote), account})
}

// accountLocked finds or makes the entry of a (source, account) pair.
// When the table is full it forgets the least recently seen pair that is
// not locked out, so a flood of failures for made-up accounts cannot
// push a real lockout out of the table; only when every pair is locked
// does the one whose lockout ends first go.
func (g *Gate) accountLocked(key accountKey) *failures {
	now := g.options.Now()
	if f, ok := g.accounts[key]; ok {
		f.seen = now
		return f
	}
	if len(g.accounts) >= g.options.Sources {
		var victim accountKey
		var best *failures
		for candidate, f := range g.accounts {
			if best == nil || evictsBefore(f, best, now) {
				victim, best = candidate, f
			}
		}
		delete(g.accounts, victim)
	}
	f := &failures{seen: now}
	g.accounts[key] = f
	return f
}

// evictsBefore orders pairs for eviction: unlocked before locked, then
// the least recently seen, or the lockout ending first.
func evictsBefore(a, b *failures, now time.Time) bool {
	aLocked, bLocked := now.Before(a.lockedUntil), now.Before(b.lockedUntil)
	switch {
	case aLocked != bLocked:
		return !aLocked
	case aLocked:
		return a.lockedUntil.Before(b.lockedUntil)
	}
	return a.seen.Before(b.seen)
}

// sourceLocked finds or makes the source's entry, forgetting the least
// recently seen one when the table is full.
func (g *Gate) sourceLocked(ip string) *source {
	now := g.options.Now()
	if s, ok := g.sources[ip]; ok {
		s.seen = now
		return s
	}
	if len(g.sources) >= g.options.Sources {
		var oldest string
		var oldestSeen time.Time
		for key, s := range g.sources {
			if oldest == "" || s.seen.Before(oldestSeen) {
				oldest, oldestSeen = key, s.seen
			}
		}
		delete(g.sources, oldest)
	}
	s := &source{tokens: g.options.ConnectionBurst, refilled: now, seen: now}
	g.sources[ip] = s
	return s
}

// QuotaBucket is an identity's or an account's publish quota: two token
// buckets (records and bytes), each holding one second's worth.
type QuotaBucket struct {
	mu       sync.Mutex
	now      func() time.Time
	rates    QuotaLimits
	messages float64
	bytes    float64
	refilled time.Time
}

func newQuotaBucket(now func() time.Time) *QuotaBucket {
	return &QuotaBucket{now: now, refilled: now(), messages: -1}
}

func (q *QuotaBucket) setRates(rates QuotaLimits) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.messages < 0 { // first use: start full
		q.messages, q.bytes = rates.MessagesPerSecond, rates.BytesPerSecond
	}
	q.rates = rates
}

// Take spends one record of size bytes, or returns how long until the
// quota has room for it (nothing is spent then).
func (q *QuotaBucket) Take(size int) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if wait := q.waitLocked(size); wait > 0 {
		return wait
	}
	q.spendLocked(size)
	return 0
}

// waitLocked refills the bucket and returns how long until it has room
// for a record of size bytes (0: room now).
func (q *QuotaBucket) waitLocked(size int) time.Duration {
	now := q.now()
	elapsed := now.Sub(q.refilled).Seconds()
	q.refilled = now
	var wait float64
	if rate := q.rates.MessagesPerSecond; rate > 0 {
		q.messages = min(rate, q.messages+elapsed*rate)
		if q.messages < 1 {
			wait = max(wait, (1-q.messages)/rate)
		}
	}
	if rate := q.rates.BytesPerSecond; rate > 0 {
		q.bytes = min(rate, q.bytes+elapsed*rate)
		need := min(float64(size), rate) // a record larger than a second's worth waits for a full bucket
		if q.bytes < need {
			wait = max(wait, (need-q.bytes)/rate)
		}
	}
	// Rounded up to whole milliseconds, the unit the hint travels in: a
	// hint rounded down sends the client back a fraction too early, to be
	// refused again.
	return time.Duration(math.Ceil(wait*1000)) * time.Millisecond
}

func (q *QuotaBucket) spendLocked(size int) {
	if q.rates.MessagesPerSecond > 0 {
		q.messages--
	}
	if q.rates.BytesPerSecond > 0 {
		q.bytes -= float64(size)
	}
}
