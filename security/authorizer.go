package security

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/wire"
)

// ErrNotAuthorized is every authentication failure. Callers must not
// tell the peer more than this.
var ErrNotAuthorized = errors.New("security: not authorized")

// ErrCredentialExpired is the failure of a right credential past its
// expiry. It wraps ErrNotAuthorized: the peer is answered exactly as for
// a wrong one, and only the audit trail tells them apart.
var ErrCredentialExpired = fmt.Errorf("%w: credential expired", ErrNotAuthorized)

// Authorizer authenticates peers against the auth config and answers
// scope questions. Reload swaps the whole config atomically.
type Authorizer struct {
	path    string
	logger  *slog.Logger
	current atomic.Pointer[authSnapshot]
	stamps  atomic.Pointer[fileStamps]
	reload  sync.Mutex
	// hashing admits one Argon2id verification at a time: each takes the
	// hash's memory (64 MiB by default), and the RAM budget has room for
	// one, not for one per connecting peer.
	hashing chan struct{}
	// quota survives reloads: keyed by identity and account name.
	quota quotaState
	// creations orders stream creations that quotas check (LockCreations).
	creations sync.Mutex
	now       func() time.Time
	// live ends the sessions of identities removed, rotated or expired
	// (revoke.go).
	live liveSessions
}

// NewAuthorizer loads the auth config at path (refused when group- or
// world-readable).
func NewAuthorizer(path string, logger *slog.Logger) (*Authorizer, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &Authorizer{path: path, logger: logger, hashing: make(chan struct{}, 1), quota: newQuotaState(), now: time.Now}
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Path is the auth config file.
func (a *Authorizer) Path() string { return a.path }

// Reload reads the auth config again; on error the previous one stays in
// force. Identities keep their quotas' state across reloads. This is the
// hook the SIGHUP handler calls.
func (a *Authorizer) Reload() error {
	a.reload.Lock()
	defer a.reload.Unlock()
	stamps := stampFiles([]string{a.path})
	file, err := LoadAuthFile(a.path)
	if err != nil {
		return err
	}
	snap, err := compile(file)
	if err != nil {
		return err
	}
	if snap.dummy.key != nil {
		// One verification of the costliest hash now, so the first
		// failure after a start or reload already waits as long as the
		// slowest would (SlowestCheck). It takes the hashing slot like a
		// login: the RAM budget has room for one hash at a time.
		a.hashing <- struct{}{}
		started := time.Now()
		snap.dummy.matches(nil)
		snap.noteCheck(time.Since(started))
		<-a.hashing
	}
	a.current.Store(snap)
	a.stamps.Store(&stamps)
	a.live.poke()
	a.quota.forget(snap)
	return nil
}

// Watch reloads the auth config when the file changes, every interval,
// until ctx ends.
func (a *Authorizer) Watch(ctx context.Context, interval time.Duration) {
	watchFiles(ctx, interval, func() []string { return []string{a.path} }, func() fileStamps { return *a.stamps.Load() }, func() {
		if err := a.Reload(); err != nil {
			a.logger.Error("auth config changed but did not load; the previous one stays in force", "error", err.Error())
			return
		}
		a.logger.Info("auth config reloaded", "path", a.path, "identities", len(a.current.Load().identity))
	})
}

// Authenticate returns the identity credentials prove, or
// ErrNotAuthorized. peerIdentity is the verified client certificate's
// identity ("" without one). A password check may take tens of
// milliseconds: call it off the network reactor.
func (a *Authorizer) Authenticate(credentials wire.Credentials, peerIdentity string) (*Identity, error) {
	snap := a.current.Load()
	switch credentials.Mechanism {
	case wire.AuthToken:
		var found *Identity
		for _, id := range snap.tokens { // every one, no early exit: constant time in the secret
			if tokenMatches(credentials.Token, id.token) {
				found = id
			}
		}
		if found != nil {
			return a.unexpired(found)
		}
	case wire.AuthPassword:
		id := snap.byName[credentials.Username]
		hash := snap.dummy
		if id != nil && id.Mechanism == "password" {
			hash = id.password
		}
		if hash.key == nil { // no password identities at all: nothing to hide
			break
		}
		a.hashing <- struct{}{}
		started := time.Now()
		ok := hash.matches(credentials.Password)
		snap.noteCheck(time.Since(started))
		<-a.hashing
		if ok && id != nil && id.Mechanism == "password" {
			return a.unexpired(id)
		}
	case wire.AuthMTLS, wire.AuthNone:
		if id := snap.byMTLS[peerIdentity]; peerIdentity != "" && id != nil {
			return a.unexpired(id)
		}
	}
	return nil, ErrNotAuthorized
}

// unexpired passes an identity whose credential was proven, unless it
// has expired.
func (a *Authorizer) unexpired(id *Identity) (*Identity, error) {
	if id.expiredAt(a.now()) {
		return nil, fmt.Errorf("%w: identity %q at %s", ErrCredentialExpired, id.Name, id.expires.UTC().Format(time.RFC3339))
	}
	return id, nil
}

// SlowestCheck is the longest password verification seen with the
// config in force. Hashes may have different parameters, so a wrong
// password for one identity costs less than for another, or than the
// costliest hash an unknown username is checked against; answering every
// failure no sooner than this after the Hello makes them all take the
// same time (docs/SECURITY.md, "Username enumeration").
func (a *Authorizer) SlowestCheck() time.Duration {
	return time.Duration(a.current.Load().slowest.Load())
}

// Why a session's identity no longer holds (Current, Track).
const (
	EndRemoved = "removed" // the config no longer has the name
	EndRotated = "rotated" // the name has another credential
	EndExpired = "expired" // the credential's expiry has passed
)

// Current returns the identity's version in the config now in force, or
// why it no longer holds (EndRemoved, EndRotated, EndExpired): a session
// authenticated as id ends then. Sessions call it per request; while the
// config is unchanged it is one atomic load (and a clock read for an
// identity that expires).
func (a *Authorizer) Current(id *Identity) (*Identity, string) {
	snap := a.current.Load()
	now := id
	if id.snapshot != snap {
		var ok bool
		if now, ok = snap.byName[id.Name]; !ok {
			return nil, EndRemoved
		}
		if now.Mechanism != id.Mechanism || now.credential != id.credential {
			return nil, EndRotated
		}
	}
	if now.expiredAt(a.now()) {
		return nil, EndExpired
	}
	return now, ""
}

// Describe lists identities for logs (never secrets).
func (a *Authorizer) Describe() string {
	snap := a.current.Load()
	return fmt.Sprintf("%d identities from %s", len(snap.identity), a.path)
}
