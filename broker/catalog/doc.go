// Package catalog owns the broker's stream metadata: every named stream
// (its partition count, its retention bounds, when it was created) and
// every subject binding (pattern → stream). It is one small file,
// <data-dir>/streams.json. Package datadir opens it for the broker and the
// offline tools alike, and keeps it in step with the log directories.
//
// Invariants:
//   - A change is durable before Store.Update returns: the new image is
//     written to a temporary file, synced, renamed over streams.json and
//     the directory synced; the version it replaces is kept as
//     streams.json.prev first. A crash at any instant leaves the old
//     catalog or the new one, never a mix.
//   - Every image carries a format version and a CRC32C of its body, so
//     damage is detected, never half-trusted. A damaged streams.json falls
//     back to streams.json.prev, and with no intact copy to an empty
//     catalog (the broker then adopts the logs it finds on disk); either
//     way the damage is reported in Recovery, never a failed boot.
//   - What Validate accepts is what Store keeps: names pass
//     segment.ValidateStreamName, partitions are 1..MaxPartitions,
//     every binding names a stream of the catalog, no name or pattern
//     appears twice.
//
// The package knows nothing of subjects beyond their bytes: pattern
// syntax and ambiguity belong to package subject, which the broker
// consults before it calls Update.
package catalog
