package security

import (
	"errors"
	"testing"
)

// TestPatternNeverMatchesEmptyTokens: no pattern stands for the empty
// name (the name of broker-wide requests), and a wildcard never stands
// for an empty token; ">" alone still covers every name, dead-letter
// queues included.
func TestPatternNeverMatchesEmptyTokens(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", false}, {">", "", false}, {"*.>", "", false},
		{"orders.*", "orders.", false}, {"orders.>", "orders.", false}, {"*.eu", ".eu", false},
		{"a.*.b", "a..b", false}, {"a..b", "a..b", true},
		{">", ".dlq.orders", true}, {".dlq.>", ".dlq.orders.eu", true}, {".dlq.*", ".dlq.orders", true},
		{"*.dlq.orders", ".dlq.orders", false}, {"orders.>", ".dlq.orders.eu", false},
	}
	for _, c := range cases {
		p, err := ParsePattern(c.pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", c.pattern, err)
		}
		if got := p.Match(c.name); got != c.want {
			t.Errorf("%q matches %q = %v, want %v", c.pattern, c.name, got, c.want)
		}
		if got := p.MatchBytes([]byte(c.name)); got != c.want {
			t.Errorf("%q matches bytes %q = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

// TestGroupRules: a group no rule covers is open to every identity (what
// a config without rules always meant); a covered group only to the
// identities a covering rule names for the verb.
func TestGroupRules(t *testing.T) {
	data := []byte(`
[[identity]]
name = "billing"
token_sha256 = "` + TokenDigest("b") + `"
subscribe = ["orders"]

[[identity]]
name = "intruder"
token_sha256 = "` + TokenDigest("i") + `"
subscribe = ["orders"]

[[group]]
stream = "orders"
group = "billing.>"
join = ["billing"]
commit = ["billing"]
reset = ["ops"]
`)
	file, err := ParseAuthFile(data)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := compile(file)
	if err != nil {
		t.Fatal(err)
	}
	billing, intruder := snap.byName["billing"], snap.byName["intruder"]
	cases := []struct {
		who          *Identity
		verb         GroupVerb
		stream, name string
		want         bool
	}{
		{billing, GroupJoin, "orders", "billing.eu", true},
		{billing, GroupCommit, "orders", "billing.eu", true},
		{billing, GroupReset, "orders", "billing.eu", false},
		{intruder, GroupJoin, "orders", "billing.eu", false},
		{intruder, GroupCommit, "orders", "billing.eu", false},
		{intruder, GroupJoin, "orders", "audit", true},        // no rule covers it
		{intruder, GroupJoin, "payments", "billing.eu", true}, // another stream's group
	}
	for _, c := range cases {
		if got := c.who.MayUseGroup(c.verb, []byte(c.stream), []byte(c.name)); got != c.want {
			t.Errorf("%s %s %s/%s = %v, want %v", c.who.Name, c.verb, c.stream, c.name, got, c.want)
		}
	}
	// Rules survive a save and a load; a file without rules writes none.
	path := t.TempDir() + "/auth.toml"
	if err := SaveAuthFile(path, file); err != nil {
		t.Fatal(err)
	}
	again, err := LoadAuthFile(path)
	if err != nil || len(again.Groups) != 1 || again.Groups[0].Group != "billing.>" || len(again.Groups[0].Reset) != 1 {
		t.Fatalf("reloaded rules %+v: %v", again.Groups, err)
	}
	for _, bad := range []string{
		"[[group]]\nstream = \"\"\ngroup = \"g\"\n",
		"[[group]]\nstream = \"orders\"\ngroup = \"a.>.b\"\n",
		"[[group]]\nstream = \"orders\"\ngroup = \"g\"\njoin = [\"two words\"]\n",
		"[[group]]\nstream = \"orders\"\ngroup = \"g\"\nread = [\"x\"]\n",
	} {
		if _, err := ParseAuthFile([]byte(bad)); !errors.Is(err, ErrAuthConfig) {
			t.Errorf("%q: %v, want ErrAuthConfig", bad, err)
		}
	}
}

// TestPublishSubjects: subject patterns limit the subjects an identity
// publishes, apart from the stream patterns of its scopes.
func TestPublishSubjects(t *testing.T) {
	id, err := compileIdentity(IdentityEntry{Name: "device-1", TokenSHA256: TokenDigest("d"),
		Publish: []string{"telemetry"}, PublishSubjects: []string{"telemetry.device-1.>"}})
	if err != nil {
		t.Fatal(err)
	}
	if !id.Allowed(ScopePublish, "telemetry") || id.Allowed(ScopePublish, "telemetry.device-1.temp") {
		t.Errorf("publish patterns name streams")
	}
	for subject, want := range map[string]bool{"telemetry.device-1.temp": true, "telemetry.device-2.temp": false, "": false} {
		if got := id.SubjectAllowed([]byte(subject)); got != want {
			t.Errorf("subject %q allowed = %v, want %v", subject, got, want)
		}
	}
	open, _ := compileIdentity(IdentityEntry{Name: "any", TokenSHA256: TokenDigest("a"), Publish: []string{">"}})
	if !open.SubjectAllowed(nil) || !open.SubjectAllowed([]byte("x.y")) || open.LimitsSubjects() {
		t.Errorf("an identity without publish_subjects is limited")
	}
}
