package subject

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Binding routes every subject its Pattern matches to Stream.
type Binding struct {
	Pattern string
	Stream  string
}

// AmbiguousError refuses a binding that would let one subject route to two
// streams. It wraps ErrAmbiguous.
type AmbiguousError struct {
	New      Binding // the binding refused
	Existing Binding // a binding in the table it overlaps (the first by pattern, when several do)
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%v: pattern %q for stream %q overlaps the binding of %q to stream %q",
		ErrAmbiguous, e.New.Pattern, e.New.Stream, e.Existing.Pattern, e.Existing.Stream)
}

func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }

// Table is an immutable set of bindings in which no subject matches
// bindings to two different streams. Bind and Unbind return a new Table
// and share every trie node they did not change, so a Table may be read by
// any number of goroutines while a new one is built. A nil *Table is an
// empty table.
type Table struct {
	root     *node
	bindings []Binding // sorted by Pattern; patterns are unique
	// exact maps each literal pattern (no wildcard) to its stream, so a
	// publish to a literally bound subject costs one hash probe however
	// many bindings there are; a walk of a trie with thousands of
	// children per node touches cold memory at every level. The trie
	// keeps literal patterns too: conflicts and wildcard lookups use it.
	exact map[string]string
}

// node is one token position of the trie. A pattern ending at this node
// stores its stream in end; a pattern whose next token is `>` stores its
// stream in tail. Streams are never empty, so "" means none.
type node struct {
	literal map[string]*node
	star    *node
	end     string
	tail    string
}

func (n *node) empty() bool {
	return len(n.literal) == 0 && n.star == nil && n.end == "" && n.tail == ""
}

// NewTable builds a table from bindings, refusing them as Bind would
// (a duplicate of the same binding is accepted once).
func NewTable(bindings ...Binding) (*Table, error) {
	table := &Table{root: &node{}}
	for _, binding := range bindings {
		next, err := table.bind(binding.Pattern, binding.Stream, true)
		if err != nil {
			return nil, err
		}
		table = next
	}
	return table, nil
}

// Bind returns a table that also routes subjects matching pattern to
// stream. Binding a pattern again to the same stream returns the same
// table. It refuses with an *AmbiguousError when the pattern overlaps a
// binding to another stream, including the same pattern bound elsewhere
// (unbind it first). Overlapping bindings to one stream are allowed: they
// cannot make a lookup ambiguous.
func (t *Table) Bind(pattern, stream string) (*Table, error) {
	return t.bind(pattern, stream, false)
}

// bind adds a binding; inPlace lets NewTable grow nodes only it can see
// instead of copying the path for every binding.
func (t *Table) bind(pattern, stream string, inPlace bool) (*Table, error) {
	if t == nil {
		t = &Table{}
	}
	if err := ValidatePattern([]byte(pattern)); err != nil {
		return nil, err
	}
	if stream == "" {
		return nil, fmt.Errorf("%w: pattern %q", ErrNoStream, pattern)
	}
	index, found := t.find(pattern)
	if found && t.bindings[index].Stream == stream {
		return t, nil
	}
	if conflict, ok := t.firstConflict(pattern, stream); ok {
		return nil, &AmbiguousError{New: Binding{Pattern: pattern, Stream: stream}, Existing: conflict}
	}
	tokens := strings.Split(pattern, ".")
	root := insert(t.root, tokens, stream, inPlace)
	bindings, exact := t.bindings, t.exact
	if !inPlace {
		bindings = slices.Clone(bindings)
	}
	bindings = slices.Insert(bindings, index, Binding{Pattern: pattern, Stream: stream})
	// Lookup trusts a subject found in exact to be valid, so only a
	// pattern that is a valid subject goes in (a literal pattern always
	// is; the check keeps Lookup right should the two rules ever part).
	if literal(tokens) && Validate([]byte(pattern)) == nil {
		if exact == nil || !inPlace {
			exact = maps.Clone(exact)
			if exact == nil {
				exact = map[string]string{}
			}
		}
		exact[pattern] = stream
	}
	return &Table{root: root, bindings: bindings, exact: exact}, nil
}

// literal reports whether a valid pattern's tokens hold no wildcard.
func literal(tokens []string) bool {
	return !slices.ContainsFunc(tokens, func(token string) bool { return token == "*" || token == ">" })
}

// firstConflict returns the smallest-pattern binding to another stream
// that overlaps pattern, so the error names the same binding every time.
func (t *Table) firstConflict(pattern, stream string) (Binding, bool) {
	var conflict Binding
	found := false
	walkOverlapping(t.root, nil, strings.Split(pattern, "."), func(binding Binding) {
		if binding.Stream == stream {
			return
		}
		if !found || binding.Pattern < conflict.Pattern {
			conflict, found = binding, true
		}
	})
	return conflict, found
}

// insert returns the node with the binding added below it. Unless inPlace,
// every node on the path is a copy (siblings are shared), so readers of the
// old table never see a change.
func insert(current *node, tokens []string, stream string, inPlace bool) *node {
	if current == nil {
		current = &node{}
	} else if !inPlace {
		clone := *current
		clone.literal = cloneChildren(current.literal)
		current = &clone
	}
	token := tokens[0]
	switch {
	case token == ">":
		current.tail = stream
	case len(tokens) == 1 && token == "*":
		current.star = insertEnd(current.star, stream, inPlace)
	case len(tokens) == 1:
		if current.literal == nil {
			current.literal = map[string]*node{}
		}
		current.literal[token] = insertEnd(current.literal[token], stream, inPlace)
	case token == "*":
		current.star = insert(current.star, tokens[1:], stream, inPlace)
	default:
		if current.literal == nil {
			current.literal = map[string]*node{}
		}
		current.literal[token] = insert(current.literal[token], tokens[1:], stream, inPlace)
	}
	return current
}

func insertEnd(current *node, stream string, inPlace bool) *node {
	if current == nil {
		return &node{end: stream}
	}
	if !inPlace {
		clone := *current
		current = &clone
	}
	current.end = stream
	return current
}

func cloneChildren(children map[string]*node) map[string]*node {
	if children == nil {
		return nil
	}
	clone := make(map[string]*node, len(children))
	for token, child := range children {
		clone[token] = child
	}
	return clone
}

// Unbind returns a table without the binding of pattern, or ErrNotBound.
func (t *Table) Unbind(pattern string) (*Table, error) {
	if t == nil {
		t = &Table{}
	}
	index, found := t.find(pattern)
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrNotBound, pattern)
	}
	root := remove(t.root, strings.Split(pattern, "."))
	if root == nil {
		root = &node{}
	}
	exact := t.exact
	if _, bound := exact[pattern]; bound {
		exact = maps.Clone(exact)
		delete(exact, pattern)
	}
	return &Table{root: root, bindings: slices.Delete(slices.Clone(t.bindings), index, index+1), exact: exact}, nil
}

// remove returns a copy of the path without the binding, pruning nodes
// left empty (nil when this node itself is left empty). The binding is
// known to exist.
func remove(current *node, tokens []string) *node {
	clone := *current
	clone.literal = cloneChildren(current.literal)
	token := tokens[0]
	switch {
	case token == ">":
		clone.tail = ""
	case token == "*":
		clone.star = removeBelow(clone.star, tokens[1:])
	default:
		if child := removeBelow(clone.literal[token], tokens[1:]); child != nil {
			clone.literal[token] = child
		} else {
			delete(clone.literal, token)
		}
	}
	if clone.empty() {
		return nil
	}
	return &clone
}

func removeBelow(child *node, tokens []string) *node {
	if len(tokens) > 0 {
		return remove(child, tokens)
	}
	clone := *child
	clone.end = ""
	if clone.empty() {
		return nil
	}
	return &clone
}

func (t *Table) find(pattern string) (int, bool) {
	index := sort.Search(len(t.bindings), func(i int) bool { return t.bindings[i].Pattern >= pattern })
	return index, index < len(t.bindings) && t.bindings[index].Pattern == pattern
}

// Bindings returns a copy of the bindings, sorted by pattern.
func (t *Table) Bindings() []Binding {
	if t == nil {
		return nil
	}
	return slices.Clone(t.bindings)
}

// Len returns the number of bindings.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.bindings)
}

// Lookup returns the stream the literal subject routes to. It takes no
// lock and does not allocate. Bindings to different streams never overlap,
// so the first binding the walk finds is the only answer. An invalid
// subject routes nowhere.
//
// The walk visits each trie node at most once (a node sits at one depth,
// reached by one path), so its cost is bounded by the subject's tokens and
// the trie's size, never exponential in wildcards.
func (t *Table) Lookup(subject []byte) (string, bool) {
	if t == nil || len(subject) == 0 || len(subject) > MaxLength {
		return "", false
	}
	// A subject equal to a literal binding is valid: bindings were
	// validated when they were made. Only a subject the trie matched
	// through a wildcard still needs checking.
	if stream, found := t.exact[string(subject)]; found {
		return stream, true
	}
	stream := lookup(t.root, subject)
	if stream == "" || Validate(subject) != nil {
		return "", false
	}
	return stream, true
}

// lookup walks the remaining, non-empty subject below current.
func lookup(current *node, subject []byte) string {
	if current == nil {
		return ""
	}
	if current.tail != "" {
		return current.tail
	}
	token, rest, last := nextToken(subject)
	// Indexing a map with string(bytes) does not allocate.
	for _, child := range [2]*node{current.literal[string(token)], current.star} {
		switch {
		case child == nil:
		case last:
			if child.end != "" {
				return child.end
			}
		default:
			if stream := lookup(child, rest); stream != "" {
				return stream
			}
		}
	}
	return ""
}

// StreamsMatching returns, sorted and without repeats, the streams whose
// bindings overlap the pattern: the streams a subscription to the pattern
// can receive from. An invalid pattern reaches none.
func (t *Table) StreamsMatching(pattern []byte) []string {
	if t == nil || ValidatePattern(pattern) != nil {
		return nil
	}
	var streams []string
	walkOverlapping(t.root, nil, strings.Split(string(pattern), "."), func(binding Binding) {
		streams = append(streams, binding.Stream)
	})
	slices.Sort(streams)
	return slices.Compact(streams)
}

// walkOverlapping calls visit for every binding below current that
// overlaps the remaining, non-empty pattern tokens; prefix holds the
// tokens that led to current. The rules are Overlap's, applied to the
// trie: a literal token follows its own child and the `*` child, `*`
// follows every child, and `>` on either side overlaps anything with at
// least one more token.
func walkOverlapping(current *node, prefix, tokens []string, visit func(Binding)) {
	if current == nil {
		return
	}
	if current.tail != "" {
		visit(Binding{Pattern: joinPattern(prefix, ">"), Stream: current.tail})
	}
	token := tokens[0]
	if token == ">" {
		visitBelow(current, prefix, visit)
		return
	}
	follow := func(childToken string, child *node) {
		if len(tokens) == 1 {
			if child.end != "" {
				visit(Binding{Pattern: joinPattern(prefix, childToken), Stream: child.end})
			}
			return
		}
		walkOverlapping(child, append(prefix[:len(prefix):len(prefix)], childToken), tokens[1:], visit)
	}
	if token == "*" {
		for childToken, child := range current.literal {
			follow(childToken, child)
		}
	} else if child := current.literal[token]; child != nil {
		follow(token, child)
	}
	if current.star != nil {
		follow("*", current.star)
	}
}

// visitBelow visits every binding of at least one more token below current
// (what a `>` at current's position overlaps), its tail included.
func visitBelow(current *node, prefix []string, visit func(Binding)) {
	each := func(childToken string, child *node) {
		path := append(prefix[:len(prefix):len(prefix)], childToken)
		if child.end != "" {
			visit(Binding{Pattern: strings.Join(path, "."), Stream: child.end})
		}
		if child.tail != "" {
			visit(Binding{Pattern: joinPattern(path, ">"), Stream: child.tail})
		}
		visitBelow(child, path, visit)
	}
	for childToken, child := range current.literal {
		each(childToken, child)
	}
	if current.star != nil {
		each("*", current.star)
	}
}

func joinPattern(prefix []string, last string) string {
	if len(prefix) == 0 {
		return last
	}
	return strings.Join(prefix, ".") + "." + last
}
