// Package security owns what stands between the network and the broker's
// data: TLS (server certificates that reload without dropping
// connections, client verification and the mTLS identity), identities and
// their scopes (the auth config file, bearer tokens, Argon2id passwords,
// credential expiry and the end of the sessions of revoked identities,
// stream and subject patterns with their deny lists, consumer group
// rules, accounts: the namespace of each account's names in the engine's,
// and the exports between accounts), pre-authentication limits (the
// half-open table with its overall and per-source caps, per-source
// connection rate, failed-auth lockout), per-identity and per-account
// quotas (connections, streams, partitions, stored bytes, publish rate),
// and the audit trail.
//
// Invariants:
//   - Secrets never leave in clear: tokens are stored as SHA-256 digests
//     and compared in constant time, passwords as Argon2id hashes whose
//     parameters travel in the hash string; neither appears in a log line
//     or the audit file.
//   - An authentication failure looks the same whatever its cause (no
//     such identity, wrong secret, wrong mechanism, locked out), and takes
//     the same time: an unknown username is checked against the costliest
//     hash of the config, and SlowestCheck tells callers how long to hold
//     every failure. A peer learns nothing about which identities exist.
//   - A credential holds only until its expiry; past it, it fails like a
//     wrong one (ErrCredentialExpired wraps ErrNotAuthorized, and only the
//     audit trail tells them apart).
//   - A session lives no longer than the credential it proved: Track ends
//     it within RevocationInterval of its identity being removed, given
//     another credential under its name, or expiring.
//   - Failed authentications lock out one account from one source, never
//     a whole address; password hashes below MinimumArgon2id never load.
//   - The audit trail never drops an essential event (auth, admin, denied,
//     removed, anything an identity did): Record waits for room, so it is
//     called only where the connection that caused the event may wait;
//     TryRecord never waits and hands the wait back to the caller (the
//     network reactor). Other events are dropped only when the queue is
//     full, and counted.
//   - Secret files (auth config, private keys, token and password files)
//     are refused when group- or world-readable.
//   - Reloads swap whole immutable snapshots (certificates, identities)
//     through atomic pointers: a handshake or a request sees one
//     consistent version, and established connections are never dropped
//     by a certificate reload.
//   - A deny pattern wins over every allow pattern of its kind (stream
//     scope, publish or subscribe subjects, group verb).
//   - A quota refusal spends nothing and carries a retry hint; identity
//     and account quotas are separate limits, both checked.
//   - Memory is bounded: per-source tables have a fixed capacity and
//     forget their oldest entries (I8); quota state holds an entry per
//     configured identity or account with a rate, per holder with an open
//     connection (dropped at zero), and per stream owner.
//   - A full half-open table never refuses a newcomer while it holds a
//     connection that can be evicted: it evicts the oldest (of the
//     newcomer's source, when that source is at its own cap), so
//     connections that send nothing cannot lock real clients out.
//   - Time for limits comes from an injected monotonic clock (I6).
//   - No pattern matches the empty name, and a wildcard never stands for
//     an empty token: a request naming no stream is never allowed by a
//     pattern that happens to match "".
//
// The package knows nothing about streams or the wire protocol beyond the
// auth material it decodes; the broker asks it questions.
package security
