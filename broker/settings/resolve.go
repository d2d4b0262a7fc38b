package settings

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Value is what a knob's flag holds; pflag.Value satisfies it.
type Value interface {
	Set(text string) error
	String() string
}

// Knob is one setting as the command line defines it.
type Knob struct {
	Name  string
	Value Value
	// Default is the flag's default as printed, for error hints.
	Default string
}

// Layers are the sources above the defaults. Nil or empty layers are
// skipped.
type Layers struct {
	Profile Profile
	File    *File
	// LookupEnv reads the environment (os.LookupEnv in the binary).
	LookupEnv func(name string) (string, bool)
	// OnCommandLine reports whether a knob was given as a flag: such a
	// knob keeps its value whatever the other layers say.
	OnCommandLine func(name string) bool
}

// Choice is one knob's winning value and its layer.
type Choice struct {
	Text   string
	Source Source
	// Key is the name as that layer spells it, for errors.
	Key string
}

// Apply sets every knob not given on the command line to the value of the
// highest layer that has one (env > file > profile) and returns where each
// knob's value came from. Each knob is set once, with the winning text, so
// list-valued flags do not accumulate. Errors name the layer, the key as
// that layer spells it, the value and the default as an example.
func Apply(knobs []Knob, layers Layers) (map[string]Source, error) {
	sources := make(map[string]Source, len(knobs))
	var problems []error
	for _, knob := range knobs {
		if layers.OnCommandLine != nil && layers.OnCommandLine(knob.Name) {
			sources[knob.Name] = Source{Kind: SourceFlag}
			continue
		}
		choice, ok := layers.choose(knob.Name)
		if !ok {
			sources[knob.Name] = Source{Kind: SourceDefault}
			continue
		}
		if err := knob.Value.Set(choice.Text); err != nil {
			hint := ""
			if knob.Default != "" && !strings.Contains(err.Error(), "for example") {
				hint = "for example " + knob.Default + " (the default)"
			}
			problems = append(problems, &KeyError{Key: choice.Key, Value: choice.Text, Source: choice.Source,
				Err: fmt.Errorf("%w: %w", ErrBadValue, err), Hint: hint})
			continue
		}
		sources[knob.Name] = choice.Source
	}
	return sources, errors.Join(problems...)
}

// choose finds the highest layer below the command line with a value.
func (layers Layers) choose(name string) (Choice, bool) {
	if layers.LookupEnv != nil {
		env := EnvName(name)
		if text, ok := layers.LookupEnv(env); ok {
			return Choice{Text: text, Source: Source{Kind: SourceEnv, Detail: env}, Key: env}, true
		}
	}
	if layers.File != nil {
		if text, ok := layers.File.Values[name]; ok {
			return Choice{Text: text, Source: Source{Kind: SourceFile, Detail: layers.File.Path}, Key: layers.File.Keys[name]}, true
		}
	}
	if text, ok := layers.Profile.Values[name]; ok {
		return Choice{Text: text, Source: Source{Kind: SourceProfile, Detail: layers.Profile.Name}, Key: name}, true
	}
	return Choice{}, false
}

// SelectProfile picks the profile: the flag when given, else
// IRONBUS_PROFILE, else the file's profile key, else balanced.
func SelectProfile(flagValue string, onCommandLine bool, lookupEnv func(string) (string, bool), file *File) (Profile, Source, error) {
	name, source := DefaultProfile, Source{Kind: SourceDefault}
	switch {
	case onCommandLine:
		name, source = flagValue, Source{Kind: SourceFlag}
	case lookupEnv != nil && envSet(lookupEnv, EnvName(ProfileKnob)):
		name, _ = lookupEnv(EnvName(ProfileKnob))
		source = Source{Kind: SourceEnv, Detail: EnvName(ProfileKnob)}
	case file != nil && file.Values[ProfileKnob] != "":
		name, source = file.Values[ProfileKnob], Source{Kind: SourceFile, Detail: file.Path}
	}
	profile, err := LookupProfile(name)
	if err != nil {
		return Profile{}, source, fmt.Errorf("%s: %w", source, err)
	}
	return profile, source, nil
}

func envSet(lookupEnv func(string) (string, bool), name string) bool {
	_, ok := lookupEnv(name)
	return ok
}

// UnknownEnv returns the IRONBUS_* variables of environ that name no knob
// (variables under IRONBUS_TEST_ belong to test suites and are skipped),
// each with a did-you-mean when one is close. The environment is shared
// with other programs, so the caller warns rather than refuses.
func UnknownEnv(environ []string, names []string) []string {
	var known []string
	for _, name := range names {
		known = append(known, EnvName(name))
	}
	var unknown []string
	for _, entry := range environ {
		variable, _, _ := strings.Cut(entry, "=")
		if !strings.HasPrefix(variable, EnvPrefix) || strings.HasPrefix(variable, EnvPrefix+"TEST_") || slices.Contains(known, variable) {
			continue
		}
		if suggestion := Suggest(variable, known); suggestion != "" {
			variable += " (did you mean " + suggestion + "?)"
		}
		unknown = append(unknown, variable)
	}
	return unknown
}
