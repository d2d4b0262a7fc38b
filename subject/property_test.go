package subject_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/subject"
)

// The property tests draw patterns over a two-letter alphabet (plus the
// wildcards) and check every answer against the reference matcher over
// all subjects of up to five tokens of {a, b, x}: x stands for every
// token no pattern names. Two patterns of at most five tokens that
// overlap share a witness of at most five tokens, so that enumeration
// decides Overlap exactly.
var (
	propertyAlphabet = []string{"a", "b", "x"}
	propertySubjects = allSubjects(propertyAlphabet, 5)
	propertyStreams  = []string{"s1", "s2", "s3"}
)

func randomPattern(random *rand.Rand) string {
	length := 1 + random.IntN(5)
	parts := make([]string, length)
	for index := range parts {
		switch roll := random.IntN(10); {
		case roll < 3:
			parts[index] = "*"
		case roll < 4 && index == length-1:
			parts[index] = ">"
		case roll < 7:
			parts[index] = "a"
		default:
			parts[index] = "b"
		}
	}
	return strings.Join(parts, ".")
}

func bruteOverlap(a, b string) bool {
	for _, candidate := range propertySubjects {
		if referenceMatch(tokens(a), candidate) && referenceMatch(tokens(b), candidate) {
			return true
		}
	}
	return false
}

func TestPropertyMatchAndOverlap(t *testing.T) {
	random := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 3000; round++ {
		a, b := randomPattern(random), randomPattern(random)
		if got, want := subject.Overlap([]byte(a), []byte(b)), bruteOverlap(a, b); got != want {
			t.Fatalf("Overlap(%q, %q) = %v, brute force says %v", a, b, got, want)
		}
		compiled, err := subject.Compile([]byte(a))
		if err != nil {
			t.Fatal(err)
		}
		for _, candidate := range propertySubjects[random.IntN(40):][:20] {
			text := strings.Join(candidate, ".")
			want := referenceMatch(tokens(a), candidate)
			if got := subject.Match([]byte(a), []byte(text)); got != want {
				t.Fatalf("Match(%q, %q) = %v, reference says %v", a, text, got, want)
			}
			if got := compiled.Match([]byte(text)); got != want {
				t.Fatalf("Pattern(%q).Match(%q) = %v, reference says %v", a, text, got, want)
			}
		}
	}
}

// TestPropertyTable binds random patterns to random streams one at a time,
// sometimes unbinding one, and after every step compares the table with
// the model: the list of bindings accepted so far.
func TestPropertyTable(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		random := rand.New(rand.NewPCG(seed, 99))
		table, err := subject.NewTable()
		if err != nil {
			t.Fatal(err)
		}
		var model []subject.Binding
		for step := 0; step < 30; step++ {
			if len(model) > 0 && random.IntN(6) == 0 {
				victim := model[random.IntN(len(model))]
				if table, err = table.Unbind(victim.Pattern); err != nil {
					t.Fatalf("seed %d: Unbind(%q) = %v", seed, victim.Pattern, err)
				}
				model = slices.DeleteFunc(model, func(b subject.Binding) bool { return b == victim })
			} else {
				table, model = bindAndCheck(t, seed, table, model, randomPattern(random), propertyStreams[random.IntN(3)])
			}
			checkTable(t, seed, table, model, random)
		}
	}
}

func bindAndCheck(t *testing.T, seed uint64, table *subject.Table, model []subject.Binding, pattern, stream string) (*subject.Table, []subject.Binding) {
	t.Helper()
	conflict := false
	duplicate := false
	for _, binding := range model {
		if binding.Pattern == pattern && binding.Stream == stream {
			duplicate = true
		}
		if binding.Stream != stream && bruteOverlap(binding.Pattern, pattern) {
			conflict = true
		}
	}
	next, err := table.Bind(pattern, stream)
	switch {
	case conflict:
		var ambiguous *subject.AmbiguousError
		if !errors.As(err, &ambiguous) {
			t.Fatalf("seed %d: Bind(%q, %q) = %v over %v, want ambiguous", seed, pattern, stream, err, model)
		}
		if ambiguous.Existing.Stream == stream || !bruteOverlap(ambiguous.Existing.Pattern, pattern) ||
			!slices.Contains(model, ambiguous.Existing) {
			t.Fatalf("seed %d: Bind(%q, %q) names %v, not a conflicting binding", seed, pattern, stream, ambiguous.Existing)
		}
		return table, model
	case err != nil:
		t.Fatalf("seed %d: Bind(%q, %q) = %v over %v, want accepted", seed, pattern, stream, err, model)
	case duplicate:
		if next != table {
			t.Fatalf("seed %d: rebinding %q to %q made a new table", seed, pattern, stream)
		}
		return table, model
	}
	return next, append(model, subject.Binding{Pattern: pattern, Stream: stream})
}

func checkTable(t *testing.T, seed uint64, table *subject.Table, model []subject.Binding, random *rand.Rand) {
	t.Helper()
	sorted := slices.Clone(model)
	slices.SortFunc(sorted, func(a, b subject.Binding) int { return strings.Compare(a.Pattern, b.Pattern) })
	if got := table.Bindings(); !slices.Equal(got, sorted) || table.Len() != len(model) {
		t.Fatalf("seed %d: Bindings() = %v, model %v", seed, got, sorted)
	}
	rebuilt, err := subject.NewTable(model...)
	if err != nil {
		t.Fatalf("seed %d: NewTable(%v) = %v", seed, model, err)
	}
	for _, candidate := range propertySubjects {
		var want []string
		for _, binding := range model {
			if referenceMatch(tokens(binding.Pattern), candidate) {
				want = append(want, binding.Stream)
			}
		}
		slices.Sort(want)
		want = slices.Compact(want)
		if len(want) > 1 {
			t.Fatalf("seed %d: %v routes to %v: the table holds overlapping bindings %v", seed, candidate, want, model)
		}
		stream, ok := table.Lookup([]byte(strings.Join(candidate, ".")))
		if ok != (len(want) == 1) || (ok && stream != want[0]) {
			t.Fatalf("seed %d: Lookup(%v) = %q, %v; model says %v (bindings %v)", seed, candidate, stream, ok, want, model)
		}
		if again, okAgain := rebuilt.Lookup([]byte(strings.Join(candidate, "."))); again != stream || okAgain != ok {
			t.Fatalf("seed %d: NewTable's Lookup(%v) = %q, %v; Bind's %q, %v", seed, candidate, again, okAgain, stream, ok)
		}
	}
	pattern := randomPattern(random)
	var want []string
	for _, binding := range model {
		if bruteOverlap(binding.Pattern, pattern) {
			want = append(want, binding.Stream)
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if got := table.StreamsMatching([]byte(pattern)); !slices.Equal(got, want) {
		t.Fatalf("seed %d: StreamsMatching(%q) = %v, brute force %v (bindings %v)", seed, pattern, got, want, model)
	}
}
