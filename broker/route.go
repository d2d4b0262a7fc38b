package broker

import (
	"fmt"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/subject"
)

// Subject routing. The broker owns one subject.Router built from the
// catalog's bindings; StreamAdmin bind and unbind change the catalog
// first (durably) and then the router, under bindMu, so the two never
// disagree for longer than one request. Each connection looks subjects up
// through its own subject.Cache: a hit costs no lock and no allocation.

// newRouter builds the router from the catalog's bindings. The catalog
// was checked when each binding was made; a table that no longer builds
// (a catalog edited by hand) keeps the bindings that do and reports the
// rest.
func (b *Broker) newRouters(c catalog.Catalog) {
	tables := map[string]*subject.Table{}
	for _, binding := range c.Bindings {
		domain := b.domainOf([]byte(binding.Pattern))
		next, err := tables[domain].Bind(binding.Pattern, binding.Stream)
		if err != nil {
			b.cfg.Logger.Error("a subject binding of the catalog was not loaded", "pattern", binding.Pattern, "stream", binding.Stream, "error", err.Error())
			continue
		}
		tables[domain] = next
	}
	b.router = subject.NewRouter(tables[""])
	domains := map[string]*subject.Router{}
	for domain, table := range tables {
		if domain != "" {
			domains[domain] = subject.NewRouter(table)
		}
	}
	b.domains.Store(&domains)
}

// domainOf names the routing domain of a subject or pattern ("" for the
// default one).
func (b *Broker) domainOf(name []byte) string {
	if b.cfg.RoutingDomain == nil {
		return ""
	}
	return string(name[:b.cfg.RoutingDomain(name)])
}

// routerOf returns the router of a subject's domain, or nil when the
// domain has no bindings. It does not allocate.
func (b *Broker) routerOf(subj []byte) *subject.Router {
	if b.cfg.RoutingDomain == nil {
		return b.router
	}
	n := b.cfg.RoutingDomain(subj)
	if n == 0 {
		return b.router
	}
	return (*b.domains.Load())[string(subj[:n])]
}

// routerFor returns the router of a pattern's domain, created empty when
// the domain has none yet. REQUIRES: bindMu held.
func (b *Broker) routerFor(pattern string) *subject.Router {
	domain := b.domainOf([]byte(pattern))
	if domain == "" {
		return b.router
	}
	domains := *b.domains.Load()
	if router, ok := domains[domain]; ok {
		return router
	}
	next := make(map[string]*subject.Router, len(domains)+1)
	for name, router := range domains {
		next[name] = router
	}
	router := subject.NewRouter(nil)
	next[domain] = router
	b.domains.Store(&next)
	return router
}

// routers returns every domain's router.
func (b *Broker) routers() []*subject.Router {
	all := []*subject.Router{b.router}
	for _, router := range *b.domains.Load() {
		all = append(all, router)
	}
	return all
}

// ValidateSubject checks a record's subject: an invalid one is
// ErrInvalidName (a subject is a name, like a stream's), whatever path the
// record came by.
func ValidateSubject(s []byte) error {
	if err := subject.Validate(s); err != nil {
		return fmt.Errorf("%w: record subject: %w", ErrInvalidName, err)
	}
	return nil
}

// Route returns the stream whose binding matches a record's subject,
// looked up through the caller's cache (one per connection: a hit costs no
// lock and no allocation). ErrNoRoute when no binding matches (nothing is
// stored), ErrInvalidName for an invalid subject, ErrInvalidArgument for a
// record without one.
func (b *Broker) Route(cache *subject.Cache, subj []byte) (string, error) {
	if len(subj) == 0 {
		return "", fmt.Errorf("%w: a record routed by subject carries no subject", ErrInvalidArgument)
	}
	// The lookup validates what it routes (an invalid subject routes
	// nowhere), so a routed subject is valid and validation runs again
	// only to name the error of one that did not route.
	router := b.routerOf(subj)
	stream, ok := "", false
	if router != nil {
		stream, ok = cache.Lookup(router, subj)
	}
	if !ok {
		if err := ValidateSubject(subj); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: no binding matches subject %q; nothing was stored (ironbus stream bind PATTERN STREAM)", ErrNoRoute, subj)
	}
	return stream, nil
}
