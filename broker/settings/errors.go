package settings

import (
	"errors"
	"fmt"
)

var (
	// ErrSyntax: the file is not valid TOML.
	ErrSyntax = errors.New("settings: not valid TOML")
	// ErrUnknownKey: a file key that names no knob.
	ErrUnknownKey = errors.New("settings: unknown key")
	// ErrBadValue: a value of the wrong type or unit for its knob.
	ErrBadValue = errors.New("settings: bad value")
	// ErrUnknownProfile: a profile name that is not one of Profiles.
	ErrUnknownProfile = errors.New("settings: unknown profile")
)

// KeyError says which key of which layer is wrong, with what value, and
// what to do about it.
type KeyError struct {
	// Key is as the user wrote it: a TOML key, an environment variable or
	// a knob name for a profile.
	Key    string
	Value  string
	Source Source
	// Hint is a suggestion ("did you mean ...?") or an example value.
	Hint string
	Err  error
}

func (e *KeyError) Error() string {
	message := fmt.Sprintf("%s: %s", e.Source, e.Key)
	if e.Value != "" {
		message += fmt.Sprintf(" = %q", e.Value)
	}
	message += ": " + e.Err.Error()
	if e.Hint != "" {
		message += "; " + e.Hint
	}
	return message
}

func (e *KeyError) Unwrap() error { return e.Err }
