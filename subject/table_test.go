package subject_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/ironbus/ironbus/subject"
)

func mustTable(t *testing.T, bindings ...subject.Binding) *subject.Table {
	t.Helper()
	table, err := subject.NewTable(bindings...)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func TestBindRefusesAmbiguity(t *testing.T) {
	table := mustTable(t,
		subject.Binding{Pattern: "orders.eu.*", Stream: "eu"},
		subject.Binding{Pattern: "orders.us.>", Stream: "us"},
		subject.Binding{Pattern: "audit", Stream: "audit"},
	)
	tests := []struct {
		pattern, stream string
		existing        string // "" when the bind is accepted
	}{
		{"orders.eu.created", "other", "orders.eu.*"},
		{"orders.*.created", "other", "orders.eu.*"},
		{"orders.>", "other", "orders.eu.*"},
		{">", "other", "audit"},
		{"*", "other", "audit"},
		{"orders.us", "other", ""},     // `>` needs one more token
		{"orders.eu", "other", ""},     // so does `*`
		{"orders.eu.*.x", "other", ""}, // one token too many for orders.eu.*
		{"orders.us.a.b.c", "other", "orders.us.>"},
		{"audit", "other", "audit"},       // the same pattern, another stream
		{"orders.eu.created", "eu", ""},   // overlaps only its own stream
		{"orders.>", "eu", "orders.us.>"}, // its own stream, but also us
		{"audit.>", "other", ""},
	}
	for _, test := range tests {
		next, err := table.Bind(test.pattern, test.stream)
		if test.existing == "" {
			if err != nil {
				t.Errorf("Bind(%q, %q) = %v, want accepted", test.pattern, test.stream, err)
			} else if next.Len() != table.Len()+1 {
				t.Errorf("Bind(%q, %q): %d bindings, want %d", test.pattern, test.stream, next.Len(), table.Len()+1)
			}
			continue
		}
		var ambiguous *subject.AmbiguousError
		if !errors.As(err, &ambiguous) || !errors.Is(err, subject.ErrAmbiguous) {
			t.Errorf("Bind(%q, %q) = %v, want an *AmbiguousError", test.pattern, test.stream, err)
			continue
		}
		if ambiguous.Existing.Pattern != test.existing ||
			ambiguous.New != (subject.Binding{Pattern: test.pattern, Stream: test.stream}) {
			t.Errorf("Bind(%q, %q) = %v, want it to name %q", test.pattern, test.stream, err, test.existing)
		}
	}
}

func TestBindIsIdempotentAndCopyOnWrite(t *testing.T) {
	table := mustTable(t, subject.Binding{Pattern: "a.*", Stream: "s"})
	same, err := table.Bind("a.*", "s")
	if err != nil || same != table {
		t.Fatalf("rebinding the same binding = %p, %v, want the same table", same, err)
	}
	duplicate := mustTable(t, subject.Binding{Pattern: "a.*", Stream: "s"}, subject.Binding{Pattern: "a.*", Stream: "s"})
	if duplicate.Len() != 1 {
		t.Errorf("NewTable with a duplicate: %d bindings, want 1", duplicate.Len())
	}
	next, err := table.Bind("a.b.c", "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := table.Lookup([]byte("a.b.c")); ok {
		t.Error("Bind changed the table it was called on")
	}
	if stream, ok := next.Lookup([]byte("a.b.c")); !ok || stream != "t" {
		t.Errorf("new table: Lookup(a.b.c) = %q, %v", stream, ok)
	}
	if stream, ok := next.Lookup([]byte("a.b")); !ok || stream != "s" {
		t.Errorf("new table: Lookup(a.b) = %q, %v", stream, ok)
	}
}

func TestBindRefusesBadInput(t *testing.T) {
	table := mustTable(t)
	if _, err := table.Bind("a..b", "s"); !errors.Is(err, subject.ErrInvalidPattern) {
		t.Errorf("Bind(a..b) = %v, want ErrInvalidPattern", err)
	}
	if _, err := table.Bind("a", ""); !errors.Is(err, subject.ErrNoStream) {
		t.Errorf("Bind(a, \"\") = %v, want ErrNoStream", err)
	}
	if _, err := subject.NewTable(subject.Binding{Pattern: "a", Stream: "x"}, subject.Binding{Pattern: "*", Stream: "y"}); !errors.Is(err, subject.ErrAmbiguous) {
		t.Errorf("NewTable(a→x, *→y) = %v, want ErrAmbiguous", err)
	}
}

func TestUnbind(t *testing.T) {
	table := mustTable(t,
		subject.Binding{Pattern: "a.b", Stream: "x"},
		subject.Binding{Pattern: "a.b.>", Stream: "y"},
		subject.Binding{Pattern: "a.*.c", Stream: "y"},
		subject.Binding{Pattern: "z", Stream: "z"},
	)
	next, err := table.Unbind("a.b")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := next.Lookup([]byte("a.b")); ok {
		t.Error("a.b still routes after Unbind")
	}
	if stream, ok := next.Lookup([]byte("a.b.c")); !ok || stream != "y" {
		t.Errorf("Lookup(a.b.c) = %q, %v after unbinding a.b", stream, ok)
	}
	if stream, ok := table.Lookup([]byte("a.b")); !ok || stream != "x" {
		t.Errorf("Unbind changed the old table: Lookup(a.b) = %q, %v", stream, ok)
	}
	if _, err := next.Unbind("a.b"); !errors.Is(err, subject.ErrNotBound) {
		t.Errorf("second Unbind = %v, want ErrNotBound", err)
	}
	// a.b no longer blocks a.* to another stream (a.b.> and a.*.c need three tokens).
	if _, err := next.Bind("a.*", "w"); err != nil {
		t.Errorf("Bind(a.*, w) after unbinding a.b = %v", err)
	}
	empty := next
	for _, binding := range next.Bindings() {
		if empty, err = empty.Unbind(binding.Pattern); err != nil {
			t.Fatal(err)
		}
	}
	if empty.Len() != 0 || len(empty.Bindings()) != 0 {
		t.Errorf("after unbinding everything: %v", empty.Bindings())
	}
	if _, ok := empty.Lookup([]byte("z")); ok {
		t.Error("an empty table routes z")
	}
}

func TestBindingsSorted(t *testing.T) {
	table := mustTable(t,
		subject.Binding{Pattern: "c", Stream: "1"},
		subject.Binding{Pattern: "a.>", Stream: "2"},
		subject.Binding{Pattern: "b.*", Stream: "3"},
	)
	want := []subject.Binding{{Pattern: "a.>", Stream: "2"}, {Pattern: "b.*", Stream: "3"}, {Pattern: "c", Stream: "1"}}
	got := table.Bindings()
	if !slices.Equal(got, want) {
		t.Errorf("Bindings() = %v, want %v", got, want)
	}
	got[0].Stream = "changed"
	if table.Bindings()[0].Stream != "2" {
		t.Error("Bindings() returned the table's own slice")
	}
}

func TestStreamsMatching(t *testing.T) {
	table := mustTable(t,
		subject.Binding{Pattern: "orders.eu.*", Stream: "eu"},
		subject.Binding{Pattern: "orders.eu.vip.>", Stream: "vip"},
		subject.Binding{Pattern: "orders.us.>", Stream: "us"},
		subject.Binding{Pattern: "orders.us.x", Stream: "us"},
		subject.Binding{Pattern: "audit", Stream: "audit"},
	)
	tests := []struct {
		pattern string
		want    []string
	}{
		{">", []string{"audit", "eu", "us", "vip"}},
		{"orders.>", []string{"eu", "us", "vip"}},
		{"orders.*.*", []string{"eu", "us"}},
		{"orders.*.vip.a", []string{"us", "vip"}},
		{"orders.eu.x", []string{"eu"}},
		{"*", []string{"audit"}},
		{"nothing.>", nil},
		{"orders..x", nil},
	}
	for _, test := range tests {
		if got := table.StreamsMatching([]byte(test.pattern)); !slices.Equal(got, test.want) {
			t.Errorf("StreamsMatching(%q) = %v, want %v", test.pattern, got, test.want)
		}
	}
}

func TestNilTableIsEmpty(t *testing.T) {
	var table *subject.Table
	if _, ok := table.Lookup([]byte("a")); ok || table.Len() != 0 || table.Bindings() != nil || table.StreamsMatching([]byte(">")) != nil {
		t.Error("a nil table is not empty")
	}
	next, err := table.Bind("a", "s")
	if err != nil {
		t.Fatal(err)
	}
	if stream, ok := next.Lookup([]byte("a")); !ok || stream != "s" {
		t.Errorf("Lookup(a) = %q, %v", stream, ok)
	}
	if _, err := table.Unbind("a"); !errors.Is(err, subject.ErrNotBound) {
		t.Errorf("Unbind on a nil table = %v", err)
	}
}

func TestLookupRefusesInvalidSubjects(t *testing.T) {
	table := mustTable(t, subject.Binding{Pattern: ">", Stream: "all"})
	for _, input := range []string{"", "a..b", "a.*", "a.>", "a b", "a.", "\xff"} {
		if stream, ok := table.Lookup([]byte(input)); ok {
			t.Errorf("Lookup(%q) = %q, want no route", input, stream)
		}
	}
}
