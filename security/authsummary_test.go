package security

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A summary shows every setting and never the secret.
func TestSummaryNeverHoldsTheSecret(t *testing.T) {
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	entry := IdentityEntry{Name: "writer", TokenSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		PasswordHash: "$argon2id$v=19$m=65536,t=3,p=1$c2FsdA$a2V5", Publish: []string{"orders.>"}, MaxStreams: 3,
		Expires: now.Add(-time.Hour)}
	summary := entry.Summary(now)
	text, err := json.Marshal(summary)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{entry.TokenSHA256, "argon2id", "c2FsdA"} {
		if strings.Contains(string(text), secret) {
			t.Fatalf("the summary shows a secret (%q): %s", secret, text)
		}
	}
	if summary.Account != DefaultAccount || summary.MaxStreams != 3 || !summary.Expired || summary.Expires != "2026-12-31T23:00:00Z" {
		t.Fatalf("summary %+v", summary)
	}
}
