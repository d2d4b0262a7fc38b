// Package subject owns IronBus's subject and pattern syntax, their
// validation and matching, the overlap test that keeps routing
// unambiguous, the immutable routing table (a trie of tokens) and the
// Router that serves it to publishers without locks, with a per-connection
// Cache. It is pure data structures: no I/O, standard library only. The
// broker owns the Router; the segment package's filtered reader takes a
// *Pattern as its Matcher.
//
// # Syntax
//
// A subject is dot-separated tokens, like "orders.eu.created". A pattern is
// a subject whose tokens may also be wildcards: `*` matches exactly one
// token and `>`, allowed only as the last token, matches one or more.
// Validate and ValidatePattern refuse an empty input, an empty token
// (leading, trailing or doubled dot), whitespace, control characters
// (ASCII and Unicode), bytes that are not UTF-8, a wildcard character
// mixed with others in a token (`a*`, `>b`), a `>` before the last token,
// wildcards in a literal subject, more than MaxLength bytes and more than
// MaxTokens tokens. Errors are *SyntaxError values wrapping
// ErrInvalidSubject or ErrInvalidPattern with the reason, token index and
// byte offset; they never echo the input, so a hostile subject cannot
// inject anything into a log line or a reply.
//
// # Invariants
//
//   - No two bindings in a Table to different streams overlap (Overlap:
//     some subject matches both). Bind refuses such a binding with an
//     *AmbiguousError, so every subject routes to at most one stream and
//     Lookup may stop at the first match it finds.
//   - A Table never changes after it is built. Bind and Unbind copy the
//     path they change and share the rest, so readers need no lock.
//   - Match, (*Pattern).Match, (*Table).Lookup and a Cache hit do not
//     allocate (the tests check with testing.AllocsPerRun). A Table
//     lookup visits each trie node at most once, so its cost is bounded
//     by the table, never exponential in wildcards.
//   - Invalid input never matches and never routes: Match, Lookup and
//     Overlap answer false for it rather than guessing.
//   - Memory is bounded (invariant I8): a subject is at most MaxLength
//     bytes and a Cache at most CacheEntries subjects; a full Cache starts
//     over.
//   - Router.Update publishes the new table before it bumps the
//     generation, so a Cache that sees the new generation also sees the
//     new table, and drops every entry stored before.
package subject
