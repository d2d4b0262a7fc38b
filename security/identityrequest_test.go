package security

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestIdentityRequestBuild(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := IdentityRequest{Entry: IdentityEntry{Name: "writer", Account: DefaultAccount, PublishSubjects: []string{"orders.>"}},
		TokenFile: tokenFile, Scopes: []string{"publish", " admin"}, Expires: "24h"}
	entry, err := good.Build(now)
	if err != nil {
		t.Fatal(err)
	}
	if entry.Account != "" || entry.TokenSHA256 != TokenDigest("secret") || !entry.Expires.Equal(now.Add(24*time.Hour)) ||
		!slices.Equal(entry.Patterns(ScopePublish), []string{">"}) || !slices.Equal(entry.Patterns(ScopeAdmin), []string{">"}) ||
		entry.Patterns(ScopeSubscribe) != nil {
		t.Fatalf("built entry: %+v", entry)
	}
	for _, c := range []struct {
		key  string
		edit func(*IdentityRequest)
	}{
		{"account", func(r *IdentityRequest) { r.Entry.Account = "bad/account" }},
		{"deny_publish", func(r *IdentityRequest) { r.Entry.DenyPublish = []string{"a.>.b"} }},
		{"deny_subscribe_subjects", func(r *IdentityRequest) { r.Entry.DenySubscribeSubjects = []string{""} }},
		{"token_file", func(r *IdentityRequest) { r.TokenFile = filepath.Join(t.TempDir(), "missing") }},
		{"expires", func(r *IdentityRequest) { r.Expires = "soon" }},
		{"streams", func(r *IdentityRequest) { r.Streams = []string{"a.>.b"} }},
		{"publish_subjects", func(r *IdentityRequest) { r.Entry.PublishSubjects = []string{"a.>.b"} }},
		{"scopes", func(r *IdentityRequest) { r.Scopes = []string{"write"} }},
	} {
		request := good
		c.edit(&request)
		var field *FieldError
		if _, err := request.Build(now); !errors.As(err, &field) || field.Key != c.key {
			t.Errorf("%s: got %v", c.key, err)
		}
	}
	for _, request := range []IdentityRequest{
		{Entry: IdentityEntry{Name: "none"}},
		{Entry: IdentityEntry{Name: "two", MTLSIdentity: "spiffe://x"}, Password: true},
	} {
		if _, err := request.Build(now); !errors.Is(err, ErrOneCredential) {
			t.Errorf("%s: got %v, want ErrOneCredential", request.Entry.Name, err)
		}
	}
}
