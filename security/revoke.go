package security

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RevocationInterval is how often the sessions of an Authorizer are
// checked against the config in force and the clock: the longest a
// session outlives the expiry of its credential. A reload that removes or
// rotates an identity checks them at once.
const RevocationInterval = 250 * time.Millisecond

// liveSessions are the authenticated sessions an Authorizer ends when
// their identity stops holding. A goroutine checks them while there is
// at least one, and exits with the last.
type liveSessions struct {
	mu      sync.Mutex
	entries map[*liveSession]struct{}
	running bool
	wake    chan struct{} // a reload or the last untrack: check now
}

// liveSession is one session: the identity as it authenticated, and how
// to end it.
type liveSession struct {
	identity *Identity
	end      func(reason string)
}

// poke makes the checking goroutine, if any, look at once.
func (l *liveSessions) poke() {
	l.mu.Lock()
	wake := l.wake
	l.mu.Unlock()
	if wake == nil {
		return
	}
	select {
	case wake <- struct{}{}:
	default:
	}
}

// Track registers a session authenticated as id. When the identity is
// removed from the config, given another credential under its name, or
// its credential expires, end runs once with the reason (EndRemoved,
// EndRotated, EndExpired), on the Authorizer's goroutine, within
// RevocationInterval of the reload or the expiry: it must not block.
// untrack forgets the session (call it when the session closes); it may
// be called more than once.
func (a *Authorizer) Track(id *Identity, end func(reason string)) (untrack func()) {
	entry := &liveSession{identity: id, end: end}
	live := &a.live
	live.mu.Lock()
	if live.entries == nil {
		live.entries = map[*liveSession]struct{}{}
		live.wake = make(chan struct{}, 1)
	}
	live.entries[entry] = struct{}{}
	if !live.running {
		live.running = true
		go a.checkSessions()
	}
	live.mu.Unlock()
	return func() {
		live.mu.Lock()
		_, tracked := live.entries[entry]
		delete(live.entries, entry)
		last := tracked && len(live.entries) == 0
		live.mu.Unlock()
		if last {
			live.poke() // let the goroutine go now
		}
	}
}

// checkSessions ends the sessions whose identity stopped holding, every
// RevocationInterval and after each reload, until none is left.
func (a *Authorizer) checkSessions() {
	ticker := time.NewTicker(RevocationInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
		case <-a.live.wake:
		}
		if !a.endSessions() {
			return
		}
	}
}

// endSessions ends every session whose identity no longer holds and
// reports whether any session is left to watch.
func (a *Authorizer) endSessions() bool {
	type ending struct {
		end    func(string)
		reason string
	}
	var ended []ending
	live := &a.live
	live.mu.Lock()
	for entry := range live.entries {
		if _, reason := a.Current(entry.identity); reason != "" {
			delete(live.entries, entry)
			ended = append(ended, ending{entry.end, reason})
		}
	}
	left := len(live.entries) > 0
	live.running = left
	live.mu.Unlock()
	for _, e := range ended {
		e.end(e.reason)
	}
	return left
}

// ErrBadExpiry is an expiry that is neither a duration nor a time.
var ErrBadExpiry = errors.New("security: bad expiry")

// ParseExpiry reads when a credential ends: a positive duration from now
// ("720h", "90m"; "d" counts days: "30d"), or an RFC 3339 time
// ("2027-01-31T00:00:00Z") that must be later than now. The result is
// absolute and in UTC: the auth file stores an instant, so the expiry
// does not move when the file is edited or the broker restarts.
func ParseExpiry(text string, now time.Time) (time.Time, error) {
	if at, err := time.Parse(time.RFC3339, text); err == nil {
		if !at.After(now) {
			return time.Time{}, fmt.Errorf("%w: %s is not in the future", ErrBadExpiry, text)
		}
		return at.UTC(), nil
	}
	duration, err := time.ParseDuration(text)
	if days, ok := strings.CutSuffix(text, "d"); ok {
		var count int
		if count, err = strconv.Atoi(days); err == nil {
			duration = time.Duration(min(max(count, -1), 100*366)) * 24 * time.Hour // bounded before it can overflow
		}
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %q: want a duration (720h, 30d) or an RFC 3339 time (2027-01-31T00:00:00Z)", ErrBadExpiry, text)
	}
	if duration <= 0 || duration > 100*365*24*time.Hour {
		return time.Time{}, fmt.Errorf("%w: %q: a duration must be positive and at most 100 years", ErrBadExpiry, text)
	}
	return now.Add(duration).UTC().Truncate(time.Second), nil
}
