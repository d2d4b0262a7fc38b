package security

import (
	"errors"
	"fmt"
	"slices"
)

// Consumer group ACLs. A [[group]] rule of the auth config covers the
// groups whose stream and name match its patterns and names, per verb,
// the identities that may use them. A group no rule covers is open to
// every identity holding the stream's scope (subscribe to consume and
// commit, admin to reset), so a config without rules means what it always
// meant; once a rule covers a group, an identity needs a covering rule
// that names it for the verb, on top of the stream's scope. A rule's deny
// lists win over every allow list: an identity a covering rule denies a
// verb may not do it, whatever another rule grants. A rule with only deny
// lists does not close the group to the identities it does not name.

// GroupVerb is what an identity does with a consumer group.
type GroupVerb uint8

// Group verbs.
const (
	// GroupJoin: consume from the group (Consume, OpenGroup) and settle
	// its leases (ack, nack, extend, term, reject, ack range).
	GroupJoin GroupVerb = iota
	// GroupCommit: move its cursor (commit, cumulative ack).
	GroupCommit
	// GroupReset: reset or delete it (GroupAdmin, with the admin scope).
	GroupReset
	groupVerbCount
)

var groupVerbNames = [groupVerbCount]string{"join", "commit", "reset"}

func (v GroupVerb) String() string {
	if v < groupVerbCount {
		return groupVerbNames[v]
	}
	return fmt.Sprintf("group_verb(%d)", uint8(v))
}

// GroupRule is one [[group]] entry of the auth config.
//
//	[[group]]
//	stream = "orders.>"       # stream pattern
//	group = "billing"         # group name pattern
//	join = ["billing-worker"] # identities that may consume and settle leases
//	commit = ["billing-worker"]
//	reset = ["ops"]
//	deny_join = ["intern"]    # deny lists win over allow lists
type GroupRule struct {
	Stream     string   `toml:"stream"`
	Group      string   `toml:"group"`
	Join       []string `toml:"join,omitempty"`
	Commit     []string `toml:"commit,omitempty"`
	Reset      []string `toml:"reset,omitempty"`
	DenyJoin   []string `toml:"deny_join,omitempty"`
	DenyCommit []string `toml:"deny_commit,omitempty"`
	DenyReset  []string `toml:"deny_reset,omitempty"`
}

// Identities returns the rule's identity names for verb.
func (r GroupRule) Identities(verb GroupVerb) []string {
	switch verb {
	case GroupJoin:
		return r.Join
	case GroupCommit:
		return r.Commit
	case GroupReset:
		return r.Reset
	}
	return nil
}

// DeniedIdentities returns the rule's deny list for verb.
func (r GroupRule) DeniedIdentities(verb GroupVerb) []string {
	switch verb {
	case GroupJoin:
		return r.DenyJoin
	case GroupCommit:
		return r.DenyCommit
	case GroupReset:
		return r.DenyReset
	}
	return nil
}

// groupRule is a compiled GroupRule.
type groupRule struct {
	stream, group Pattern
	identities    [groupVerbCount][]string
	denied        [groupVerbCount][]string
	covers        bool // false for a rule of deny lists only
}

// compileGroupRules checks every rule; names must be identity names
// (1 to 256 characters without whitespace), though not necessarily ones
// the file defines yet.
func compileGroupRules(rules []GroupRule) ([]groupRule, error) {
	out := make([]groupRule, 0, len(rules))
	for i, rule := range rules {
		compiled, err := compileGroupRule(rule)
		if err != nil {
			return nil, fmt.Errorf("%w: group rule %d (stream %q, group %q): %w", ErrAuthConfig, i+1, rule.Stream, rule.Group, err)
		}
		out = append(out, compiled)
	}
	return slices.Clip(out), nil
}

func compileGroupRule(rule GroupRule) (groupRule, error) {
	var out groupRule
	var err error
	if out.stream, err = ParsePattern(rule.Stream); err != nil {
		return out, fmt.Errorf("stream: %w", err)
	}
	if out.group, err = ParsePattern(rule.Group); err != nil {
		return out, fmt.Errorf("group: %w", err)
	}
	allows, denies := false, false
	for verb := range groupVerbCount {
		for _, name := range rule.Identities(verb) {
			if !validIdentityName(name) {
				return out, fmt.Errorf("%s: %q: %w", verb, name, errBadIdentityName)
			}
		}
		for _, name := range rule.DeniedIdentities(verb) {
			if !validIdentityName(name) {
				return out, fmt.Errorf("deny_%s: %q: %w", verb, name, errBadIdentityName)
			}
		}
		out.identities[verb] = slices.Clip(slices.Clone(rule.Identities(verb)))
		out.denied[verb] = slices.Clip(slices.Clone(rule.DeniedIdentities(verb)))
		allows = allows || rule.Identities(verb) != nil
		denies = denies || rule.DeniedIdentities(verb) != nil
	}
	out.covers = allows || !denies
	return out, nil
}

var errBadIdentityName = errors.New("name must be 1 to 256 characters without whitespace")

// MayUseGroup reports whether the group rules let the identity do verb
// on group of stream. It does not check the stream's scope (the caller
// does that first) and does not allocate.
func (id *Identity) MayUseGroup(verb GroupVerb, stream, group []byte) bool {
	if verb >= groupVerbCount {
		return false
	}
	covered, named := false, false
	for i := range id.snapshot.groups {
		rule := &id.snapshot.groups[i]
		if !rule.stream.MatchBytes(stream) || !rule.group.MatchBytes(group) {
			continue
		}
		if slices.Contains(rule.denied[verb], id.Name) {
			return false
		}
		named = named || slices.Contains(rule.identities[verb], id.Name)
		covered = covered || rule.covers
	}
	return named || !covered
}
