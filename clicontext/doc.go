// Package clicontext stores the command line's named contexts: a broker
// address (or a cluster's seed list), how to reach it securely (TLS CA, client certificate and key,
// server name, a token file or a user and password file) and a data
// directory under one name, and which
// name is current, so an operator with several brokers types
// `ironbus context use pi-cabinet` once instead of --addr and --data-dir on
// every command.
//
// The store is one JSON file, contexts.json (schema ironbus.contexts.v1),
// in the user's config directory (os.UserConfigDir()/ironbus), or in
// IRONBUS_CONFIG_DIR when set (tests, containers).
//
// Invariants:
//   - The file is replaced atomically (temp file, fsync, rename, fsync of
//     the directory): a crash leaves the old contexts or the new ones,
//     never a torn file. It is written 0600 in a 0700 directory.
//   - A context never holds a secret itself, only the paths of its secret
//     files (token, password, private key), and those must not be
//     readable by anyone but their owner (CheckSecretFile): anything
//     looser is refused with the chmod that fixes it, both when the
//     context is created and when it is used.
//   - A context is consistent: a token file or a user with a password
//     file, never both; a client certificate only with its key.
//   - Paths are stored absolute, so a context means the same from any
//     working directory.
package clicontext
