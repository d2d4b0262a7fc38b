package security

import "fmt"

// Subject permissions. Stream scopes say which streams an identity may
// touch; subject rules narrow which records: publish_subjects and
// deny_publish_subjects the subjects it publishes, subscribe_subjects and
// deny_subscribe_subjects the subject filters it consumes with. A deny
// pattern wins over every allow pattern. Without any subject rule an
// identity publishes and consumes every subject its stream scopes reach.

// subjectRules are an identity's compiled subject patterns; nil lists
// are absent keys.
type subjectRules struct {
	publish, denyPublish     Patterns
	subscribe, denySubscribe Patterns
}

func compileSubjectRules(entry IdentityEntry) (subjectRules, error) {
	var rules subjectRules
	var err error
	if rules.publish, err = optionalPatterns("publish_subjects", entry.PublishSubjects); err != nil {
		return rules, err
	}
	if rules.denyPublish, err = optionalPatterns("deny_publish_subjects", entry.DenyPublishSubjects); err != nil {
		return rules, err
	}
	if rules.subscribe, err = optionalPatterns("subscribe_subjects", entry.SubscribeSubjects); err != nil {
		return rules, err
	}
	if rules.denySubscribe, err = optionalPatterns("deny_subscribe_subjects", entry.DenySubscribeSubjects); err != nil {
		return rules, err
	}
	return rules, nil
}

// LimitsSubjects reports whether the identity has publish_subjects.
func (id *Identity) LimitsSubjects() bool { return id.subjects.publish != nil }

// SubjectAllowed reports whether the identity may publish a record with
// this subject ("" for none): with publish_subjects only a subject one of
// them matches, and never one a deny_publish_subjects pattern matches. It
// does not allocate.
func (id *Identity) SubjectAllowed(subject []byte) bool {
	rules := &id.subjects
	return (rules.publish == nil || rules.publish.MatchBytes(subject)) && !rules.denyPublish.MatchBytes(subject)
}

// LimitsSubscribe reports whether the identity has subscribe subject
// rules, so that what it consumes must be named by a subject filter.
func (id *Identity) LimitsSubscribe() bool {
	return id.subjects.subscribe != nil || id.subjects.denySubscribe != nil
}

// FilterAllowed checks a consumer's subject filter (empty: every record)
// against the subscribe subject rules: the filter must lie within one
// subscribe_subjects pattern and share no subject with any
// deny_subscribe_subjects pattern. A filter partly outside is refused,
// not narrowed, so that a consumer never silently misses records it
// asked for. nil when allowed.
func (id *Identity) FilterAllowed(filter []byte) error {
	if !id.LimitsSubscribe() {
		return nil
	}
	if len(filter) == 0 {
		return fmt.Errorf("identity %q consumes only with a subject filter within its subscribe subjects", id.Name)
	}
	pattern, err := ParsePattern(string(filter))
	if err != nil {
		return err
	}
	if id.subjects.subscribe != nil && !id.subjects.subscribe.Covers(pattern) {
		return fmt.Errorf("identity %q has no subscribe permission on every subject filter %q matches", id.Name, filter)
	}
	for _, deny := range id.subjects.denySubscribe {
		if deny.Overlaps(pattern) {
			return fmt.Errorf("identity %q is denied subjects %q, which subject filter %q can match", id.Name, deny, filter)
		}
	}
	return nil
}
