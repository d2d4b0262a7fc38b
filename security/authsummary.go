package security

import (
	"cmp"
	"time"
)

// IdentitySummary is what may be shown of an identity (`ironbus auth ls`):
// every setting of its entry and never its secret (no digest, no hash).
type IdentitySummary struct {
	Name                     string   `json:"name"`
	Account                  string   `json:"account"`
	Mechanism                string   `json:"mechanism"`
	MTLSIdentity             string   `json:"mtls_identity,omitempty"`
	Publish                  []string `json:"publish,omitempty"`
	Subscribe                []string `json:"subscribe,omitempty"`
	Admin                    []string `json:"admin,omitempty"`
	PublishSubjects          []string `json:"publish_subjects,omitempty"`
	PublishMessagesPerSecond float64  `json:"publish_messages_per_second,omitempty"`
	PublishBytesPerSecond    float64  `json:"publish_bytes_per_second,omitempty"`
	Expires                  string   `json:"expires,omitempty"` // RFC 3339, UTC; absent: never
	Expired                  bool     `json:"expired"`
	SubscribeSubjects        []string `json:"subscribe_subjects,omitempty"`
	DenyPublish              []string `json:"deny_publish,omitempty"`
	DenySubscribe            []string `json:"deny_subscribe,omitempty"`
	DenyAdmin                []string `json:"deny_admin,omitempty"`
	DenyPublishSubjects      []string `json:"deny_publish_subjects,omitempty"`
	DenySubscribeSubjects    []string `json:"deny_subscribe_subjects,omitempty"`
	MaxConnections           int64    `json:"max_connections,omitempty"`
	MaxStreams               int64    `json:"max_streams,omitempty"`
	MaxPartitions            int64    `json:"max_partitions,omitempty"`
	MaxStoredBytes           int64    `json:"max_stored_bytes,omitempty"`
}

// Summary describes the entry without its secret, its expiry judged at
// now.
func (e IdentityEntry) Summary(now time.Time) IdentitySummary {
	out := IdentitySummary{Name: e.Name, Account: cmp.Or(e.Account, DefaultAccount), Mechanism: e.Mechanism(),
		MTLSIdentity: e.MTLSIdentity, Publish: e.Publish, Subscribe: e.Subscribe, Admin: e.Admin,
		PublishSubjects: e.PublishSubjects, PublishMessagesPerSecond: e.PublishMessagesPerSecond,
		PublishBytesPerSecond: e.PublishBytesPerSecond, SubscribeSubjects: e.SubscribeSubjects,
		DenyPublish: e.DenyPublish, DenySubscribe: e.DenySubscribe, DenyAdmin: e.DenyAdmin,
		DenyPublishSubjects: e.DenyPublishSubjects, DenySubscribeSubjects: e.DenySubscribeSubjects,
		MaxConnections: e.MaxConnections, MaxStreams: e.MaxStreams, MaxPartitions: e.MaxPartitions,
		MaxStoredBytes: e.MaxStoredBytes, Expired: !e.Expires.IsZero() && !now.Before(e.Expires)}
	if !e.Expires.IsZero() {
		out.Expires = e.Expires.UTC().Format(time.RFC3339)
	}
	return out
}
