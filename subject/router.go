package subject

import (
	"sync"
	"sync/atomic"
)

// Router holds the current routing table for any number of readers and
// one writer at a time. Readers load the table with one atomic read and
// never wait; Update builds the next table from the current one under a
// mutex, publishes it, then bumps the generation.
//
// The order (table first, generation second) is what makes Cache safe:
// a reader that sees generation g also sees a table at least as new as
// the one that made g.
type Router struct {
	current    atomic.Pointer[Table]
	generation atomic.Uint64
	update     sync.Mutex // serializes Update; readers never take it
}

// NewRouter returns a router serving table (nil serves an empty table).
func NewRouter(table *Table) *Router {
	if table == nil {
		table = &Table{root: &node{}}
	}
	router := &Router{}
	router.current.Store(table)
	return router
}

// Table returns the current table. It never blocks.
func (r *Router) Table() *Table { return r.current.Load() }

// Generation counts the tables Update has published.
func (r *Router) Generation() uint64 { return r.generation.Load() }

// Update replaces the table with build(current). A refusal (build's
// error) leaves the table and the generation as they were; so does a
// build that returns the current table unchanged (an idempotent Bind).
// Updates are serialized, so build always sees the latest table.
func (r *Router) Update(build func(*Table) (*Table, error)) error {
	r.update.Lock()
	defer r.update.Unlock()
	current := r.current.Load()
	next, err := build(current)
	if err != nil {
		return err
	}
	if next == nil {
		return ErrNoTable
	}
	if next == current {
		return nil
	}
	r.current.Store(next)
	r.generation.Add(1)
	return nil
}

// CacheEntries bounds a Cache: when full, it starts over empty. That keeps
// a connection's routing memory fixed (invariant I8) whatever subjects it
// sends (at most CacheEntries keys of at most MaxLength bytes, 64 KiB), at
// the price of a walk of the trie per entry after a reset.
const CacheEntries = 256

// Cache remembers, for one connection, where its recent subjects routed.
// It is not safe for concurrent use: each connection owns one. The zero
// Cache is ready to use.
type Cache struct {
	router     *Router
	generation uint64
	routes     map[string]route
	// hits counts the lookups the entries served since the cache last
	// started over; bypass, when above zero, is how many more misses go
	// uncached (see Lookup).
	hits   int
	bypass int
}

// cacheBypassMisses is how long a cache that did not pay for itself
// stops storing misses before it tries again.
const cacheBypassMisses = 16 * CacheEntries

type route struct {
	stream string
	ok     bool
}

// Lookup returns where subject routes in r's current table, as
// r.Table().Lookup would. A hit (same router, no Update since the entry
// was stored) does not allocate; a miss allocates the entry's key once.
// Unroutable subjects are remembered too, so a client repeating one does
// not walk the trie each time.
func (c *Cache) Lookup(r *Router, subject []byte) (string, bool) {
	generation := r.Generation()
	if c.router != r || c.generation != generation || c.routes == nil {
		c.reset(r, generation)
	}
	// While bypassing, the entries were found not to pay: probing them
	// would only add a miss to every lookup.
	if c.bypass == 0 {
		if cached, hit := c.routes[string(subject)]; hit {
			c.hits++
			return cached.stream, cached.ok
		}
	}
	stream, ok := r.Table().Lookup(subject)
	if len(subject) > MaxLength {
		return stream, ok // invalid anyway; never let one entry hold more than MaxLength bytes
	}
	if c.bypass > 0 {
		c.bypass--
		if c.bypass > 0 {
			return stream, ok
		}
		c.startOver()
	}
	if len(c.routes) >= CacheEntries {
		// A connection cycling through more subjects than the cache
		// holds would otherwise pay a key allocation and a map insert
		// per record for entries it never hits: when the entries served
		// fewer hits than there are of them, misses go uncached for a
		// while, and the trie walk (which allocates nothing) serves them.
		if c.hits < CacheEntries {
			c.bypass = cacheBypassMisses
			return stream, ok
		}
		c.startOver()
	}
	c.routes[string(subject)] = route{stream: stream, ok: ok}
	return stream, ok
}

// startOver empties the entries and their hit count.
func (c *Cache) startOver() {
	clear(c.routes)
	c.hits = 0
}

// reset empties the cache for another router or a newer generation. The
// map keeps its buckets, so refilling it does not grow it again.
func (c *Cache) reset(r *Router, generation uint64) {
	c.router, c.generation = r, generation
	c.hits, c.bypass = 0, 0
	if c.routes == nil {
		c.routes = make(map[string]route, CacheEntries)
		return
	}
	clear(c.routes)
}

// Len returns how many subjects the cache holds (at most CacheEntries).
func (c *Cache) Len() int { return len(c.routes) }
