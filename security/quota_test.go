package security

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func quotaAuthorizer(t *testing.T, file AuthFile) *Authorizer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "auth.toml")
	if err := SaveAuthFile(path, file); err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthorizer(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func quotaRefusal(t *testing.T, err error, quota, holder string) {
	t.Helper()
	var refusal *QuotaError
	if !errors.As(err, &refusal) || !errors.Is(err, ErrQuotaExceeded) || refusal.Quota != quota || refusal.Holder != holder || refusal.RetryAfter <= 0 {
		t.Fatalf("got %v, want the %s quota of %s with a retry hint", err, quota, holder)
	}
}

// TestQuotaConnections: an identity's and its account's max_connections
// each refuse the connection past them; a released one makes room, and
// nothing is kept for names without connections.
func TestQuotaConnections(t *testing.T) {
	a := quotaAuthorizer(t, AuthFile{Identities: []IdentityEntry{
		{Name: "one", TokenSHA256: TokenDigest("1"), MaxConnections: 1},
		{Name: "two", TokenSHA256: TokenDigest("2")},
	}, Accounts: []AccountQuota{{Account: "", MaxConnections: 2}}})
	snap := a.current.Load()
	one, two := snap.byName["one"], snap.byName["two"]
	first, err := a.Connect(one)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Connect(one)
	quotaRefusal(t, err, "max_connections", `identity "one"`)
	second, err := a.Connect(two)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Connect(two)
	quotaRefusal(t, err, "max_connections", "the default account")
	first.Release()
	first.Release() // once only
	if _, err := a.Connect(two); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	second.Release()
	if len(a.quota.identityConns) != 1 || a.quota.identityConns["two"] != 1 {
		t.Fatalf("connection counts %v", a.quota.identityConns)
	}
}

// TestQuotaCreate: streams, partitions and preallocated bytes count
// against the creator's and its account's quotas.
func TestQuotaCreate(t *testing.T) {
	a := quotaAuthorizer(t, AuthFile{Identities: []IdentityEntry{
		{Name: "maker", TokenSHA256: TokenDigest("m"), MaxStreams: 2, MaxPartitions: 4, MaxStoredBytes: 1000},
		{Name: "other", TokenSHA256: TokenDigest("o")},
	}, Accounts: []AccountQuota{{Account: "", MaxStreams: 3}}})
	snap := a.current.Load()
	maker, other := snap.byName["maker"], snap.byName["other"]
	usage := []StreamUsage{{Owner: "maker", Partitions: 2, Bytes: 400}}
	if err := a.CheckCreate(maker, usage, 2, 400); err != nil {
		t.Fatal(err)
	}
	quotaRefusal(t, a.CheckCreate(maker, usage, 3, 100), "max_partitions", `identity "maker"`)
	quotaRefusal(t, a.CheckCreate(maker, usage, 1, 700), "max_stored_bytes", `identity "maker"`)
	usage = append(usage, StreamUsage{Owner: "maker", Partitions: 1, Bytes: 100})
	quotaRefusal(t, a.CheckCreate(maker, usage, 1, 1), "max_streams", `identity "maker"`)
	if err := a.CheckCreate(other, usage, 8, 1<<30); err != nil {
		t.Fatalf("another identity: %v", err)
	}
	usage = append(usage, StreamUsage{Owner: "other", Partitions: 1})
	quotaRefusal(t, a.CheckCreate(other, usage, 1, 1), "max_streams", "the default account")
}

// TestQuotaStoredBytes: published bytes add to the count between
// recounts, and a recount starts again from the streams.
func TestQuotaStoredBytes(t *testing.T) {
	a := quotaAuthorizer(t, AuthFile{Identities: []IdentityEntry{
		{Name: "maker", TokenSHA256: TokenDigest("m"), MaxStoredBytes: 1000},
	}})
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	stored := int64(600)
	recounts := 0
	usage := func() []StreamUsage { recounts++; return []StreamUsage{{Owner: "maker", Partitions: 1, Bytes: stored}} }
	for range 4 {
		if err := a.ChargeStored("maker", "", 100, usage); err != nil {
			t.Fatal(err)
		}
	}
	quotaRefusal(t, a.ChargeStored("maker", "", 1, usage), "max_stored_bytes", `identity "maker"`)
	stored = 200 // retention trimmed
	now = now.Add(storedRecount)
	if err := a.ChargeStored("maker", "", 500, usage); err != nil || recounts != 2 {
		t.Fatalf("after a recount: %v (%d recounts)", err, recounts)
	}
}

// TestQuotaPublishAccount: the account's publish rate is a second bucket
// every identity of it shares; a refusal spends from neither.
func TestQuotaPublishAccount(t *testing.T) {
	a := quotaAuthorizer(t, AuthFile{Identities: []IdentityEntry{
		{Name: "fast", TokenSHA256: TokenDigest("f"), PublishMessagesPerSecond: 100},
		{Name: "free", TokenSHA256: TokenDigest("r")},
	}, Accounts: []AccountQuota{{Account: "", PublishMessagesPerSecond: 2}}})
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	snap := a.current.Load()
	fast, free := a.PublishQuota(snap.byName["fast"]), a.PublishQuota(snap.byName["free"])
	if fast == nil || free == nil || fast.account != free.account {
		t.Fatalf("the account bucket is not shared: %+v %+v", fast, free)
	}
	if err := fast.Take(1); err != nil {
		t.Fatal(err)
	}
	if err := free.Take(1); err != nil {
		t.Fatal(err)
	}
	err := fast.Take(1)
	if err == nil || err.Holder != "the default account" || err.RetryAfter != 500*time.Millisecond {
		t.Fatalf("third record: %v", err)
	}
	if fast.identity.messages != 99 {
		t.Fatalf("a refused record spent the identity's bucket: %v left", fast.identity.messages)
	}
}

// TestQuotaStateForgetsRemovedNames: a reload drops the buckets of
// identities and accounts that no longer have a rate quota (I8).
func TestQuotaStateForgetsRemovedNames(t *testing.T) {
	file := AuthFile{Identities: []IdentityEntry{
		{Name: "kept", TokenSHA256: TokenDigest("k"), PublishMessagesPerSecond: 5},
		{Name: "gone", TokenSHA256: TokenDigest("g"), PublishMessagesPerSecond: 5},
	}, Accounts: []AccountQuota{{Account: "", PublishBytesPerSecond: 100}}}
	a := quotaAuthorizer(t, file)
	snap := a.current.Load()
	a.PublishQuota(snap.byName["kept"])
	a.PublishQuota(snap.byName["gone"])
	file.Identities, file.Accounts = file.Identities[:1], nil
	if err := SaveAuthFile(a.path, file); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.quota.identityBucket["kept"]; !ok || len(a.quota.identityBucket) != 1 || len(a.quota.accountBucket) != 0 {
		t.Fatalf("buckets after the reload: %v, %v", a.quota.identityBucket, a.quota.accountBucket)
	}
}
