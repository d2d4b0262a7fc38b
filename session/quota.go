package session

import (
	"errors"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/wire"
)

// Quotas (docs/SECURITY.md, "Quotas"): the checks of an identity's and
// its account's quotas on the requests that spend them. A refusal is a
// quota_exceeded error whose RetryAfter is the quota's hint.

// quotaAnswer maps a quota refusal to its wire error.
func quotaAnswer(err error) *wire.Error {
	var refusal *security.QuotaError
	if !errors.As(err, &refusal) {
		return wireError(err)
	}
	e := wire.NewError(wire.CodeQuotaExceeded, "%s", refusal.Error())
	e.RetryAfter = refusal.RetryAfter
	return e
}

// refuseConnection answers a Hello whose identity is at a connection
// quota and closes the connection (on the authenticating goroutine).
func (s *session) refuseConnection(identity *security.Identity, requestID uint32, err error) {
	s.record(security.AuditEvent{Peer: s.conn.RemoteAddr(), Identity: identity.Name, Action: "auth", Outcome: "quota", Detail: err.Error()})
	e := quotaAnswer(err)
	e.Closes = true
	_ = s.conn.Write(wire.Append(nil, requestID, e))
	_ = s.conn.Close()
}

// chargeQuota counts one record against the stored bytes of the stream's
// owner and account, then spends the identity's and its account's publish
// rate. Stored bytes go first: a record the rate then refuses is counted
// there until the next recount (a second at most), where a rate token
// spent on a record the stored bytes refuse would be gone.
func (s *session) chargeQuota(size int, part *broker.Partition) *wire.Error {
	if s.cfg.Auth == nil {
		return nil
	}
	if err := s.cfg.Auth.ChargeStored(part.Owner(), security.StreamAccount(part.Stream()), size, s.usage); err != nil {
		return quotaAnswer(err)
	}
	if s.quota != nil {
		if refusal := s.quota.Take(size); refusal != nil {
			return quotaAnswer(refusal)
		}
	}
	return nil
}

// usage lists the streams as the quotas count them, each in the account
// its engine name belongs to.
func (s *session) usage() []security.StreamUsage {
	streams := s.engine.Usage()
	out := make([]security.StreamUsage, len(streams))
	for i, stream := range streams {
		out[i] = security.StreamUsage{Owner: stream.Owner, Account: security.StreamAccount(stream.Name), Partitions: int64(stream.Partitions), Bytes: stream.Bytes}
	}
	return out
}

// owner is the identity streams this connection creates belong to.
func (s *session) owner() string { return identityName(s.identity) }

func identityName(identity *security.Identity) string {
	if identity == nil {
		return ""
	}
	return identity.Name
}

// creationRefused checks a stream creation of partitions partitions
// against identity's quotas (nil: no auth). When it may go ahead it
// returns the unlock to call once the stream is created: creations by
// identities with quotas are checked and made one at a time, so two
// cannot both pass the last place of a quota. An existing stream creates
// nothing and is not checked.
func (s *session) creationRefused(identity *security.Identity, name []byte, partitions uint32) (unlock func(), werr *wire.Error) {
	if identity == nil || !identity.LimitsStorage() {
		return noUnlock, nil
	}
	if _, err := s.engine.Stream(name); err == nil {
		return noUnlock, nil
	}
	unlock = s.cfg.Auth.LockCreations()
	count := int64(max(partitions, 1))
	if err := s.cfg.Auth.CheckCreate(identity, s.usage(), count, count*s.engine.PreallocatedBytes()); err != nil {
		unlock()
		return noUnlock, quotaAnswer(err)
	}
	return unlock, nil
}

func noUnlock() {}
