package security

import (
	"errors"
	"testing"
)

// TestDenyBeatsAllow: a deny pattern refuses what an allow pattern of the
// same scope grants, for stream scopes, publish subjects and group rules.
func TestDenyBeatsAllow(t *testing.T) {
	id, err := compileIdentity(IdentityEntry{Name: "ops", TokenSHA256: TokenDigest("o"),
		Publish: []string{"orders.>"}, DenyPublish: []string{"orders.audit"},
		Subscribe: []string{">"}, DenySubscribe: []string{"payments.*"},
		Admin: []string{"*"}, DenyAdmin: []string{"billing"},
		PublishSubjects: []string{"orders.>"}, DenyPublishSubjects: []string{"orders.*.secret"}})
	if err != nil {
		t.Fatal(err)
	}
	streams := []struct {
		scope Scope
		name  string
		want  bool
	}{
		{ScopePublish, "orders.eu", true}, {ScopePublish, "orders.audit", false}, {ScopePublish, "payments", false},
		{ScopeSubscribe, "orders.eu", true}, {ScopeSubscribe, "payments.eu", false}, {ScopeSubscribe, "payments", true},
		{ScopeAdmin, "orders", true}, {ScopeAdmin, "billing", false}, {ScopeAdmin, "", false},
	}
	for _, c := range streams {
		if got := id.Allowed(c.scope, c.name); got != c.want {
			t.Errorf("%s on %q = %v, want %v", c.scope, c.name, got, c.want)
		}
	}
	for subject, want := range map[string]bool{"orders.eu.created": true, "orders.eu.secret": false, "payments.x": false, "": false} {
		if got := id.SubjectAllowed([]byte(subject)); got != want {
			t.Errorf("publish subject %q = %v, want %v", subject, got, want)
		}
	}
	// Deny alone, without publish_subjects: every subject but the denied.
	open, err := compileIdentity(IdentityEntry{Name: "any", TokenSHA256: TokenDigest("a"), Publish: []string{">"}, DenyPublishSubjects: []string{"admin.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if !open.SubjectAllowed(nil) || !open.SubjectAllowed([]byte("orders.x")) || open.SubjectAllowed([]byte("admin.reset")) {
		t.Errorf("deny_publish_subjects alone")
	}
	if _, err := compileIdentity(IdentityEntry{Name: "bad", TokenSHA256: TokenDigest("b"), DenyAdmin: []string{"a.>.b"}}); err == nil {
		t.Errorf("a bad deny pattern compiles")
	}
}

// TestSubscribeFilters: a consumer's subject filter must lie within
// subscribe_subjects and share no subject with deny_subscribe_subjects;
// one partly outside is refused, not narrowed.
func TestSubscribeFilters(t *testing.T) {
	id, err := compileIdentity(IdentityEntry{Name: "eu", TokenSHA256: TokenDigest("e"), Subscribe: []string{">"},
		SubscribeSubjects: []string{"orders.eu.>", "audit.*"}, DenySubscribeSubjects: []string{"orders.eu.*.card"}})
	if err != nil {
		t.Fatal(err)
	}
	for filter, want := range map[string]bool{
		"orders.eu.>":       false, // can match orders.eu.x.card
		"orders.eu.created": true, "orders.eu.*": true, "orders.eu.x.card": false, "orders.eu.x.*": false,
		"orders.>": false, "orders.us.created": false, "audit.login": true, "audit.*": true, "audit.>": false, "": false,
	} {
		if got := id.FilterAllowed([]byte(filter)) == nil; got != want {
			t.Errorf("filter %q allowed = %v, want %v", filter, got, want)
		}
	}
	free, _ := compileIdentity(IdentityEntry{Name: "free", TokenSHA256: TokenDigest("f"), Subscribe: []string{">"}})
	if free.LimitsSubscribe() || free.FilterAllowed(nil) != nil {
		t.Errorf("an identity without subscribe subject rules is limited")
	}
}

// TestPatternCoversOverlaps pins the containment and overlap of patterns.
func TestPatternCoversOverlaps(t *testing.T) {
	cases := []struct {
		a, b             string
		covers, overlaps bool
	}{
		{">", "a", true, true}, {">", "a.>", true, true}, {"a.>", ">", false, true}, {"a.>", "a", false, false},
		{"a.*", "a.b", true, true}, {"a.b", "a.*", false, true}, {"a.*", "a.>", false, true}, {"a.*", "a.b.c", false, false},
		{"*.b", "a.*", false, true}, {"a.b", "a.c", false, false}, {"a.*.c", "a.b.*", false, true}, {"a", "a", true, true},
		{"a.b.>", "a.*.c", false, true}, {"*", "a.b", false, false},
	}
	for _, c := range cases {
		a, _ := ParsePattern(c.a)
		b, _ := ParsePattern(c.b)
		if got := a.Covers(b); got != c.covers {
			t.Errorf("%q covers %q = %v, want %v", c.a, c.b, got, c.covers)
		}
		if got := a.Overlaps(b); got != c.overlaps {
			t.Errorf("%q overlaps %q = %v, want %v", c.a, c.b, got, c.overlaps)
		}
		if a.Overlaps(b) != b.Overlaps(a) {
			t.Errorf("overlap of %q and %q is not symmetric", c.a, c.b)
		}
	}
}

// TestGroupDenyRules: a deny list wins over every allow list; a rule of
// deny lists only leaves the group open to everyone else.
func TestGroupDenyRules(t *testing.T) {
	file, err := ParseAuthFile([]byte(`
[[identity]]
name = "billing"
token_sha256 = "` + TokenDigest("b") + `"
subscribe = ["orders"]

[[identity]]
name = "intern"
token_sha256 = "` + TokenDigest("i") + `"
subscribe = ["orders"]

[[group]]
stream = "orders"
group = "billing"
join = ["billing", "intern"]
commit = ["billing", "intern"]

[[group]]
stream = ">"
group = ">"
deny_commit = ["intern"]
deny_join = ["billing"]
`))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := compile(file)
	if err != nil {
		t.Fatal(err)
	}
	billing, intern := snap.byName["billing"], snap.byName["intern"]
	cases := []struct {
		who   *Identity
		verb  GroupVerb
		group string
		want  bool
	}{
		{intern, GroupJoin, "billing", true}, {intern, GroupCommit, "billing", false},
		{billing, GroupJoin, "billing", false}, {billing, GroupCommit, "billing", true},
		{intern, GroupJoin, "audit", true}, {intern, GroupCommit, "audit", false}, // covered by the deny-only rule: open but for the denied
		{billing, GroupReset, "audit", true},
	}
	for _, c := range cases {
		if got := c.who.MayUseGroup(c.verb, []byte("orders"), []byte(c.group)); got != c.want {
			t.Errorf("%s %s %s = %v, want %v", c.who.Name, c.verb, c.group, got, c.want)
		}
	}
	if _, err := ParseAuthFile([]byte("[[group]]\nstream = \"o\"\ngroup = \"g\"\ndeny_join = [\"two words\"]\n")); !errors.Is(err, ErrAuthConfig) {
		t.Errorf("a bad deny_join name: %v", err)
	}
}

// TestOldAuthFilesMeanTheSame: a file written before deny rules and
// resource quotas loads, grants what it granted, and encodes back to the
// same bytes.
func TestOldAuthFilesMeanTheSame(t *testing.T) {
	old := `[[identity]]
name = 'writer'
token_sha256 = '` + TokenDigest("w") + `'
publish = ['orders.>']
publish_subjects = ['orders.>']
publish_messages_per_second = 10.0

[[group]]
stream = 'orders'
group = 'billing'
join = ['writer']
`
	file, err := ParseAuthFile([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(encodeAuthFile(file)); got != old {
		t.Fatalf("re-encoded:\n%s\nwant:\n%s", got, old)
	}
	snap, _ := compile(file)
	id := snap.byName["writer"]
	if !id.Allowed(ScopePublish, "orders.eu") || id.LimitsSubscribe() || id.LimitsStorage() || id.Account() != DefaultAccount ||
		id.Limits() != (QuotaLimits{MessagesPerSecond: 10}) || !id.MayUseGroup(GroupCommit, []byte("payments"), []byte("x")) {
		t.Errorf("an old file grants otherwise: %+v", id)
	}
}
