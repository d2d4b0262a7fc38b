package security

import (
	"errors"
	"strings"
	"time"
)

// ErrOneCredential refuses an identity request that names no credential or
// more than one: an identity proves itself one way.
var ErrOneCredential = errors.New("security: an identity takes exactly one credential (token file, password or mTLS identity)")

// FieldError names the auth config key whose requested value was refused.
type FieldError struct {
	Key string // the auth config key, e.g. "deny_publish"
	Err error
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// IdentityRequest is an identity as an editor asks for it, before it is
// checked: the settings stored as given, the credential named but not yet
// proven, scopes and expiry as text.
type IdentityRequest struct {
	// Entry holds the name, account, mTLS identity, publish subjects, deny
	// and subscribe rules and quotas as requested; its grants and secrets
	// are filled by Build.
	Entry     IdentityEntry
	TokenFile string   // file holding the bearer token whose digest is stored
	Password  bool     // the caller sets PasswordHash on the built entry
	Scopes    []string // publish, subscribe, admin
	Streams   []string // the patterns each scope covers; none means ">"
	Expires   string   // a duration from now or an RFC 3339 time; empty: never
}

// Build checks the request and returns the entry to store. Every refusal
// is a *FieldError naming the key, or ErrOneCredential; nothing is read
// from the caller's input streams, so a password is asked for only once
// the rest is known to be good.
func (r IdentityRequest) Build(now time.Time) (IdentityEntry, error) {
	entry := r.Entry
	if entry.Account == DefaultAccount {
		entry.Account = ""
	}
	if entry.Account != "" {
		if err := ValidateAccount(entry.Account); err != nil {
			return entry, &FieldError{"account", err}
		}
	}
	for _, rule := range []struct {
		key      string
		patterns []string
	}{{"deny_publish", entry.DenyPublish}, {"deny_subscribe", entry.DenySubscribe}, {"deny_admin", entry.DenyAdmin},
		{"subscribe_subjects", entry.SubscribeSubjects}, {"deny_publish_subjects", entry.DenyPublishSubjects},
		{"deny_subscribe_subjects", entry.DenySubscribeSubjects}} {
		if _, err := ParsePatterns(rule.patterns); err != nil {
			return entry, &FieldError{rule.key, err}
		}
	}
	credentials := 0
	for _, set := range []bool{r.TokenFile != "", r.Password, entry.MTLSIdentity != ""} {
		if set {
			credentials++
		}
	}
	if credentials != 1 {
		return entry, ErrOneCredential
	}
	if r.TokenFile != "" {
		token, err := ReadSecretLine(r.TokenFile)
		if err != nil {
			return entry, &FieldError{"token_file", err}
		}
		entry.TokenSHA256 = TokenDigest(string(token))
	}
	if r.Expires != "" {
		expires, err := ParseExpiry(r.Expires, now)
		if err != nil {
			return entry, &FieldError{"expires", err}
		}
		entry.Expires = expires
	}
	return r.grant(entry)
}

// grant checks the stream and subject patterns and grants each scope.
func (r IdentityRequest) grant(entry IdentityEntry) (IdentityEntry, error) {
	patterns := r.Streams
	if len(patterns) == 0 {
		patterns = []string{">"}
	}
	if _, err := ParsePatterns(patterns); err != nil {
		return entry, &FieldError{"streams", err}
	}
	if _, err := ParsePatterns(entry.PublishSubjects); err != nil {
		return entry, &FieldError{"publish_subjects", err}
	}
	for _, text := range r.Scopes {
		scope, err := ParseScope(strings.TrimSpace(text))
		if err != nil {
			return entry, &FieldError{"scopes", err}
		}
		entry.Grant(scope, patterns)
	}
	return entry, nil
}
