package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/subject"
)

// Subjects and filters in bench: --subjects N spreads the published
// records over N distinct subjects, routed by subject through the binding
// bench makes (benchBindingPattern → the bench stream); --filter and
// --filter-sparse make the subscribe mode's consumers read through a
// subject filter, so the report separates the records delivered from the
// records traversed (delivered plus those the filter skipped).

// benchSubjectOptions are bench's subject flags.
type benchSubjectOptions struct {
	subjects     int    // distinct subjects to publish; 0: no subject, stream named directly
	filter       string // consumers' subject filter
	filterSparse int    // 1 record in filterSparse carries the matching subject
}

// Subjects bench publishes: benchSubjectPrefix + index, or, in sparse
// mode, benchSparseMatch for 1 record in K and benchSparseOther for the
// rest.
const (
	benchBindingPattern = "bench.>"
	benchSubjectPrefix  = "bench.s"
	benchSparseMatch    = "bench.match"
	benchSparseOther    = "bench.other"
)

func addBenchSubjectFlags(cmd *cobra.Command, options *benchSubjectOptions) {
	flags := cmd.Flags()
	flags.IntVar(&options.subjects, "subjects", 0, "publish over this many distinct subjects, routed by subject through a binding bench makes ("+benchBindingPattern+" → the stream)")
	flags.StringVar(&options.filter, "filter", "", "subscribe: consumers read through this subject filter (the subjects are "+benchSubjectPrefix+"0 …)")
	flags.IntVar(&options.filterSparse, "filter-sparse", 0, "subscribe: publish 1 record in K with subject "+benchSparseMatch+" (the rest "+benchSparseOther+") and filter for it")
}

// check validates the subject flags against the mode.
func (options *benchSubjectOptions) check(mode string) error {
	switch {
	case options.subjects < 0 || options.filterSparse < 0:
		return exitErrorf(exitUsage, "--subjects and --filter-sparse must not be negative")
	case options.filterSparse > 0 && options.subjects > 0:
		return exitErrorf(exitUsage, "--filter-sparse picks its own two subjects: leave out --subjects")
	case options.filterSparse > 0 && options.filter != "":
		return exitErrorf(exitUsage, "--filter-sparse filters for %s itself: leave out --filter", benchSparseMatch)
	case (options.filter != "" || options.filterSparse > 0) && mode != "subscribe":
		return exitErrorf(exitUsage, "--filter and --filter-sparse measure consumers: use them with --mode subscribe")
	case options.filter != "" && options.subjects == 0:
		return exitErrorf(exitUsage, "--filter needs subjects to filter: add --subjects N")
	}
	if options.filter != "" {
		if err := subject.ValidatePattern([]byte(options.filter)); err != nil {
			return exitErrorf(exitUsage, "--filter %q: %v", options.filter, err)
		}
	}
	return nil
}

// consumerFilter is the subject filter the consumers read through.
func (options *benchSubjectOptions) consumerFilter() string {
	if options.filterSparse > 0 {
		return benchSparseMatch
	}
	return options.filter
}

// subjectList is the subjects records cycle through, by sequence; nil
// when records carry no subject. Built once, so a Send allocates nothing
// for its subject.
func (options *benchSubjectOptions) subjectList() []string {
	switch {
	case options.filterSparse > 0:
		list := make([]string, options.filterSparse)
		for i := range list {
			list[i] = benchSparseOther
		}
		list[0] = benchSparseMatch
		return list
	case options.subjects > 0:
		list := make([]string, options.subjects)
		for i := range list {
			list[i] = fmt.Sprintf("%s%d", benchSubjectPrefix, i)
		}
		return list
	}
	return nil
}

// destination is where bench's producers send: routed by subject when
// --subjects asks for it (the cost being measured), else the stream.
func (options *benchSubjectOptions) destination(stream string) client.Destination {
	if options.subjects > 0 {
		return client.BySubject()
	}
	return client.ToStream(stream)
}

// prepareSubjects binds benchBindingPattern to the bench stream before a
// run with --subjects, so every published subject routes there.
func prepareSubjects(ctx context.Context, plan *benchPlan, addr string) error {
	if plan.subjectOptions.subjects == 0 {
		return nil
	}
	c, err := client.Dial(ctx, addr, plan.clientOptions(0))
	if err != nil {
		return err
	}
	defer c.Close()
	return benchBind(ctx, c, benchBindingPattern, plan.stream)
}
