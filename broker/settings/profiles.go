package settings

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultProfile is the profile used when none is named: the built-in
// defaults, unchanged.
const DefaultProfile = "balanced"

// ProfileKnob is the knob that names the profile. It is chosen before the
// other knobs (flag > env > file > balanced), since the profile is the
// layer under the file and the environment.
const ProfileKnob = "profile"

// Profile is a named set of knob values, keyed by knob name. Values are
// written as an operator would type them, so a profile is applied through
// the same parsers as a flag.
type Profile struct {
	Name    string
	Summary string
	Values  map[string]string
}

// Profiles returns every profile, freshly built (callers may not share or
// change them). docs/CONFIG.md gives the reason for each value.
func Profiles() []Profile {
	return []Profile{
		{Name: "edge-tiny", Summary: "a small device: everything fits a 64MiB RAM ceiling, small segments for little flash",
			Values: map[string]string{
				"ram-ceiling":       "64MiB",
				"max-connections":   "32",
				"segment-bytes":     "8MiB",
				"max-frame":         "1MiB",
				"window":            "256",
				"connection-output": "64KiB",
				"max-streams":       "16",
				"max-groups":        "16",
				"max-in-flight":     "1024",
				"staging-bytes":     "256KiB",
				// Producer features sized to the box: a few thousand
				// message ids per partition and window, a few dozen
				// open transactions.
				"dedup-max-ids": "3072",
				"max-open-txns": "64",
				// Pre-auth limits scaled to 32 connections and one small
				// CPU: a handshake flood holds at most half the slots
				// (beyond that the oldest waiting connection is closed),
				// one source holds at most half of those (so its flood
				// closes its own connections, never another source's),
				// one source cannot queue TLS handshakes
				// (each several ms of a Pi's core) faster than the box
				// does them, and a guesser is locked out sooner, since
				// every failed password costs an Argon2id hash in a 64MiB
				// box.
				"max-half-open":            "16",
				"max-half-open-per-source": "8",
				"connection-rate":          "5",
				"auth-lockout-after":       "3",
			}},
		{Name: DefaultProfile, Summary: "the built-in defaults: a server with a few hundred connections and streams",
			Values: map[string]string{}},
		{Name: "throughput", Summary: "fewer, busier streams on a large host: deeper batches and windows, bigger segments, the same worst-case RAM as balanced",
			Values: map[string]string{
				"segment-bytes": "256MiB",
				"staging-bytes": "16MiB",
				"window":        "8192",
				"max-in-flight": "16384",
				"max-streams":   "64",
				"max-groups":    "64",
			}},
	}
}

// ProfileNames lists the profile names in a stable order.
func ProfileNames() []string {
	var names []string
	for _, profile := range Profiles() {
		names = append(names, profile.Name)
	}
	return names
}

// LookupProfile returns the named profile, or an error that lists the
// names (and the closest one, for a typo).
func LookupProfile(name string) (Profile, error) {
	names := ProfileNames()
	index := slices.Index(names, name)
	if index < 0 {
		hint := ""
		if suggestion := Suggest(name, names); suggestion != "" {
			hint = fmt.Sprintf("did you mean %q? ", suggestion)
		}
		return Profile{}, fmt.Errorf("%w %q: %swant one of %s", ErrUnknownProfile, name, hint, strings.Join(names, ", "))
	}
	return Profiles()[index], nil
}
