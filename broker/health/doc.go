// Package health serves a broker's operational endpoints over HTTP/1.1:
// /healthz (liveness), /readyz (readiness), /metrics (the Prometheus
// text format, or the delimited protobuf a scraper may ask for, of a
// registry the broker owns) and /admin (one read-only JSON
// document, schema AdminSchema). It also owns the /admin document's
// types, so the CLI decodes exactly what the broker encodes.
//
// The server starts before the broker opens its data directory, so a
// probe gets "503 recovering" while recovery runs rather than a refused
// connection; Attach hands it the open broker.
//
// Invariants: the server binds a non-loopback address only with a bearer
// token (Options.Token), and with one every request to every endpoint
// must carry it (compared as SHA-256 digests in constant time; the token
// itself is not kept); a Host header that names neither loopback nor a
// configured name (nor, behind a token, an IP literal) is refused (DNS
// rebinding); no endpoint exposes a secret; every endpoint is
// read-only; nothing a request does touches the broker's hot path beyond
// atomic loads and the locks a snapshot takes briefly; a request never
// panics the process (the server recovers a handler, and handlers do not
// rely on that).
package health
