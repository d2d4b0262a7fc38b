package broker

import (
	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/subject"
	"github.com/ironbus/ironbus/wire"
)

// Subject routing. The broker owns one subject.Router built from the
// catalog's bindings; StreamAdmin bind and unbind change the catalog
// first (durably) and then the router, under bindMu, so the two never
// disagree for longer than one request. Each session looks subjects up
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

// validateSubject checks a record's subject: an invalid one is refused
// with invalid_name (a subject is a name, like a stream's), whatever path
// the record came by.
func validateSubject(s []byte) *wire.Error {
	if err := subject.Validate(s); err != nil {
		return wire.NewError(wire.CodeInvalidName, "record subject: %v", err)
	}
	return nil
}

// routeSubject returns the stream whose binding matches a record's
// subject: no_route when none does (nothing is stored), invalid_name for
// an invalid subject, invalid_request for a record without one. The
// answer aliases s.routed, valid until the next record.
func (s *session) routeSubject(subj []byte) ([]byte, *wire.Error) {
	if len(subj) == 0 {
		return nil, wire.NewError(wire.CodeInvalidRequest, "a record routed by subject carries no subject")
	}
	// The lookup validates what it routes (an invalid subject routes
	// nowhere), so a routed subject is valid and validation runs again
	// only to name the error of one that did not route.
	stream, ok := s.subjects.Lookup(s.broker.router, subj)
	if !ok {
		if werr := validateSubject(subj); werr != nil {
			return nil, werr
		}
		return nil, wire.NewError(wire.CodeNoRoute, "no binding matches subject %q; nothing was stored (ironbus stream bind PATTERN STREAM)", subj)
	}
	s.routed = append(s.routed[:0], stream...)
	return s.routed, nil
}
