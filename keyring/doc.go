// Package keyring owns the key ring of encryption at rest: the file that
// holds a broker's AES-256 master keys (one active, older ones kept for
// reading), its creation and rotation, and the derivation of the
// per-writer AES-256-GCM keys that package record seals and opens record
// bodies with.
//
// Invariants:
//   - A ring file is mode 0600 (owner only) and is refused otherwise; it is
//     written crash-safely (temporary file, fsync, rename, fsync of the
//     directory) and never in place.
//   - Key ids are 1, 2, 3, … in the order the keys were made; the newest
//     is active; rotation adds a key and removes none, so every record
//     written under an older key stays readable.
//   - A sealing key is derived with HKDF-SHA256 from a master key and a
//     fresh 16-byte random salt, drawn each time a writer starts writing a
//     log; record nonces are the record's offset, which a writer never
//     repeats, so no (derived key, nonce) pair is ever used twice.
//   - A key check (an HMAC of a fixed label under the master key) names a
//     key without revealing it: a data directory records the checks of the
//     keys it was written with, so a wrong ring is refused before a record
//     is read.
//
// The file format and the argument are in docs/SECURITY.md ("Encryption
// at rest") and docs/FORMAT.md.
package keyring
