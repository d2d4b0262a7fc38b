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
func (b *Broker) newRouter(c catalog.Catalog) *subject.Router {
	table := (*subject.Table)(nil)
	for _, binding := range c.Bindings {
		next, err := table.Bind(binding.Pattern, binding.Stream)
		if err != nil {
			b.cfg.Logger.Error("a subject binding of the catalog was not loaded", "pattern", binding.Pattern, "stream", binding.Stream, "error", err.Error())
			continue
		}
		table = next
	}
	return subject.NewRouter(table)
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
	stream, ok := cache.Lookup(b.router, subj)
	if !ok {
		if err := ValidateSubject(subj); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: no binding matches subject %q; nothing was stored (ironbus stream bind PATTERN STREAM)", ErrNoRoute, subj)
	}
	return stream, nil
}
