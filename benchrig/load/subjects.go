package load

import (
	"context"
	"errors"
	"fmt"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// Subjects bench publishes: SubjectPrefix + index, or, with a sparse
// filter, SparseMatch for 1 record in K and SparseOther for the rest.
// Every one matches BindingPattern, which a run with subjects binds to the
// stream, so they route there.
const (
	BindingPattern = "bench.>"
	SubjectPrefix  = "bench.s"
	SparseMatch    = "bench.match"
	SparseOther    = "bench.other"
)

// Subjects spread the records over subjects, routed by subject, and make
// the consumers read through a filter, so a report separates the records
// delivered from the records traversed (delivered plus those the filter
// skipped).
type Subjects struct {
	// Count is the distinct subjects published (SubjectPrefix0 …); 0: the
	// records carry none and name the stream.
	Count int
	// Filter is the consumers' subject filter.
	Filter string
	// Sparse, when above 0, publishes 1 record in Sparse as SparseMatch
	// (the rest SparseOther) and filters for it; Count and Filter are then
	// unused.
	Sparse int
}

// ConsumerFilter is the subject filter the consumers read through.
func (s Subjects) ConsumerFilter() string {
	if s.Sparse > 0 {
		return SparseMatch
	}
	return s.Filter
}

// list is the subjects records cycle through, by sequence; nil when
// records carry no subject. Built once, so a Send allocates nothing for
// its subject.
func (s Subjects) list() []string {
	switch {
	case s.Sparse > 0:
		list := make([]string, s.Sparse)
		for i := range list {
			list[i] = SparseOther
		}
		list[0] = SparseMatch
		return list
	case s.Count > 0:
		list := make([]string, s.Count)
		for i := range list {
			list[i] = fmt.Sprintf("%s%d", SubjectPrefix, i)
		}
		return list
	}
	return nil
}

// destination is where the producers send: routed by subject when Count
// asks for it (the cost being measured), else the stream.
func (s Subjects) destination(stream string) client.Destination {
	if s.Count > 0 {
		return client.BySubject()
	}
	return client.ToStream(stream)
}

// prepareSubjects creates the stream (one that exists, whatever its
// settings, is used as it is) and binds BindingPattern to it before a run
// with subjects, so every published subject routes there.
func prepareSubjects(ctx context.Context, config *Config, addr string) error {
	if config.Subjects.Count == 0 {
		return nil
	}
	c, err := client.Dial(ctx, addr, config.clientOptions(0))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.CreateStream(ctx, config.Stream, client.StreamSettings{})
	if err != nil && !errors.Is(err, &wire.Error{Code: wire.CodeConflict}) {
		return err
	}
	_, err = c.Bind(ctx, BindingPattern, config.Stream)
	return err
}

// clientOptions are a connection's options: TLS and credentials as
// configured, with the load's name and this connection's window.
func (c *Config) clientOptions(window int) client.Options {
	options := c.Connect
	options.ClientName, options.Window = "ironbus-bench", window
	options.Compression = c.Payloads.Compression
	return options
}
