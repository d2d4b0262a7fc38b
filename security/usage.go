package security

import (
	"cmp"
	"fmt"
	"time"
)

// StreamUsage is what one stream counts against the stream, partition
// and stored-bytes quotas: the identity that created it ("" for none: a
// stream made without authentication, or adopted from an older data
// directory, counts only against its account) and its account.
type StreamUsage struct {
	Owner      string
	Account    string
	Partitions int64
	Bytes      int64 // on disk, preallocated segments included
}

// storedRecount is how often the stored bytes are counted again from the
// broker's streams; records published in between are added as they go.
const storedRecount = time.Second

// storedCount is the stored bytes per identity and per account as last
// counted, plus what was published since.
type storedCount struct {
	counted    time.Time
	byIdentity map[string]int64
	byAccount  map[string]int64
}

// CheckCreate checks that id may create a stream of partitions
// partitions, preallocating preallocated bytes, given the streams that
// exist (usage): a *QuotaError when its or its account's max_streams,
// max_partitions or max_stored_bytes would be exceeded.
func (a *Authorizer) CheckCreate(id *Identity, usage []StreamUsage, partitions, preallocated int64) error {
	var own, shared StreamUsage
	var ownStreams, sharedStreams int64
	for _, stream := range usage {
		if stream.Owner == id.Name && stream.Owner != "" {
			ownStreams++
			own.Partitions += stream.Partitions
			own.Bytes += stream.Bytes
		}
		if cmp.Or(stream.Account, DefaultAccount) == id.Account() {
			sharedStreams++
			shared.Partitions += stream.Partitions
			shared.Bytes += stream.Bytes
		}
	}
	detail := fmt.Sprintf("a stream of %d partition(s) preallocating %d bytes was not created", partitions, preallocated)
	if err := overCreate(identityHolder(id), id.limits, ownStreams, own, partitions, preallocated, detail); err != nil {
		return err
	}
	if err := overCreate(accountHolder(id.Account()), id.accountLimits(), sharedStreams, shared, partitions, preallocated, detail); err != nil {
		return err
	}
	a.quota.mu.Lock()
	a.quota.stored.counted = time.Time{} // the new stream counts at the next publish
	a.quota.mu.Unlock()
	return nil
}

func overCreate(holder string, limits QuotaLimits, streams int64, used StreamUsage, partitions, preallocated int64, detail string) error {
	refuse := func(quota string, limit int64) error {
		return &QuotaError{Holder: holder, Quota: quota, Limit: limit, RetryAfter: ResourceRetryAfter, Detail: detail}
	}
	switch {
	case limits.Streams > 0 && streams+1 > limits.Streams:
		return refuse("max_streams", limits.Streams)
	case limits.Partitions > 0 && used.Partitions+partitions > limits.Partitions:
		return refuse("max_partitions", limits.Partitions)
	case limits.StoredBytes > 0 && used.Bytes+preallocated > limits.StoredBytes:
		return refuse("max_stored_bytes", limits.StoredBytes)
	}
	return nil
}

// LockCreations serializes stream creations by identities with quotas
// (CheckCreate, then the creation) and returns the unlock.
func (a *Authorizer) LockCreations() (unlock func()) {
	a.creations.Lock()
	return a.creations.Unlock
}

// LimitsStorage reports whether id or its account has a stream,
// partition or stored-bytes quota, so that its publishes and creations
// must be checked against the streams.
func (id *Identity) LimitsStorage() bool { return id.storage }

// ChargeStored counts a record of size bytes published to a stream that
// owner created, in account, against the owner's and the account's
// max_stored_bytes (what a stream stores is its creator's, whoever
// publishes), or refuses it with a *QuotaError. The counts are taken from
// usage at most once a second; records charged in between are added to
// them. Without any max_stored_bytes in the config it is one atomic load.
func (a *Authorizer) ChargeStored(owner, account string, size int, usage func() []StreamUsage) error {
	account = cmp.Or(account, DefaultAccount)
	snap := a.current.Load()
	if !snap.stored {
		return nil
	}
	var own int64
	if id := snap.byName[owner]; id != nil && owner != "" {
		own = id.limits.StoredBytes
	}
	shared := snap.accounts[account].StoredBytes
	if own == 0 && shared == 0 {
		return nil
	}
	q := &a.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	if now := a.now(); now.Sub(q.stored.counted) >= storedRecount {
		q.stored = countStored(usage(), now)
	}
	if own > 0 && q.stored.byIdentity[owner]+int64(size) > own {
		return &QuotaError{Holder: fmt.Sprintf("identity %q", owner), Quota: "max_stored_bytes", Limit: own, RetryAfter: ResourceRetryAfter,
			Detail: "the stream is that identity's"}
	}
	if shared > 0 && q.stored.byAccount[account]+int64(size) > shared {
		return &QuotaError{Holder: accountHolder(account), Quota: "max_stored_bytes", Limit: shared, RetryAfter: ResourceRetryAfter}
	}
	if owner != "" {
		q.stored.byIdentity[owner] += int64(size)
	}
	q.stored.byAccount[account] += int64(size)
	return nil
}

func countStored(usage []StreamUsage, now time.Time) storedCount {
	count := storedCount{counted: now, byIdentity: map[string]int64{}, byAccount: map[string]int64{}}
	for _, stream := range usage {
		if stream.Owner != "" {
			count.byIdentity[stream.Owner] += stream.Bytes
		}
		count.byAccount[cmp.Or(stream.Account, DefaultAccount)] += stream.Bytes
	}
	return count
}
