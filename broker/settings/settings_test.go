package settings

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var known = []string{"segment-bytes", "max-connections", "log-level", "retention-max-bytes", "profile"}

// intValue is a strict integer knob, like pflag's.
type intValue struct{ n int }

func (v *intValue) Set(text string) error {
	n, err := strconv.Atoi(text)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", text)
	}
	v.n = n
	return nil
}
func (v *intValue) String() string { return strconv.Itoa(v.n) }

func TestParseFileTablesAndTypes(t *testing.T) {
	file, err := ParseFile("a.toml", []byte(`
segment_bytes = "8MiB"
max_connections = 32
profile = "edge-tiny"
[retention]
max_bytes = 1024
`), known)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"segment-bytes": "8MiB", "max-connections": "32", "profile": "edge-tiny", "retention-max-bytes": "1024"}
	for name, text := range want {
		if file.Values[name] != text {
			t.Errorf("%s = %q, want %q", name, file.Values[name], text)
		}
	}
	if file.Keys["retention-max-bytes"] != "retention.max_bytes" {
		t.Errorf("key as written: %q", file.Keys["retention-max-bytes"])
	}
}

func TestParseFileUnknownKeySuggests(t *testing.T) {
	_, err := ParseFile("a.toml", []byte("segmnt_bytes = \"8MiB\"\nmax_conections = 3\n"), known)
	var keyErr *KeyError
	if !errors.Is(err, ErrUnknownKey) || !errors.As(err, &keyErr) {
		t.Fatalf("got %v, want an unknown-key error", err)
	}
	for _, want := range []string{"max_conections", "did you mean max_connections?", "segmnt_bytes", "did you mean segment_bytes?", "file:a.toml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	_, err = ParseFile("a.toml", []byte("wholly_unrelated = 1\n"), known)
	if err == nil || strings.Contains(err.Error(), "did you mean") || !strings.Contains(err.Error(), "config print") {
		t.Errorf("an unrelated key: %v", err)
	}
}

func TestParseFileRefuses(t *testing.T) {
	cases := map[string]error{
		"segment_bytes = 1.5\n":                             ErrBadValue,
		"segment_bytes = [1, 2]\n":                          ErrBadValue,
		"segment_bytes = 1979-05-27\n":                      ErrBadValue,
		"segment_bytes = \"1\"\n[segment]\nbytes = \"2\"\n": ErrBadValue,
		"segment_bytes = \n":                                ErrSyntax,
	}
	for text, want := range cases {
		if _, err := ParseFile("a.toml", []byte(text), known); !errors.Is(err, want) {
			t.Errorf("%q: got %v, want %v", text, err, want)
		}
	}
}

func TestApplyPrecedence(t *testing.T) {
	values := map[string]*intValue{}
	var knobs []Knob
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		values[name] = &intValue{}
		knobs = append(knobs, Knob{Name: name, Value: values[name], Default: "0"})
	}
	env := map[string]string{"IRONBUS_D": "4", "IRONBUS_E": "40"}
	layers := Layers{
		Profile:       Profile{Name: "p", Values: map[string]string{"b": "2", "c": "20", "d": "200", "e": "2000"}},
		File:          &File{Path: "f.toml", Values: map[string]string{"c": "3", "d": "30", "e": "300"}, Keys: map[string]string{"c": "c", "d": "d", "e": "e"}},
		LookupEnv:     func(name string) (string, bool) { v, ok := env[name]; return v, ok },
		OnCommandLine: func(name string) bool { return name == "e" },
	}
	values["e"].n = 5 // as parsed from the command line
	sources, err := Apply(knobs, layers)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		n      int
		source string
	}{"a": {0, "default"}, "b": {2, "profile:p"}, "c": {3, "file:f.toml"}, "d": {4, "env:IRONBUS_D"}, "e": {5, "flag"}}
	for name, w := range want {
		if values[name].n != w.n || sources[name].String() != w.source {
			t.Errorf("%s = %d from %s, want %d from %s", name, values[name].n, sources[name], w.n, w.source)
		}
	}
}

func TestApplyBadValueNamesTheKey(t *testing.T) {
	knobs := []Knob{{Name: "max-connections", Value: &intValue{}, Default: "256"}}
	_, err := Apply(knobs, Layers{LookupEnv: func(name string) (string, bool) { return "lots", name == "IRONBUS_MAX_CONNECTIONS" }})
	if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), `env:IRONBUS_MAX_CONNECTIONS: IRONBUS_MAX_CONNECTIONS = "lots"`) ||
		!strings.Contains(err.Error(), "for example 256") {
		t.Fatalf("got %v", err)
	}
}

func TestSelectProfile(t *testing.T) {
	file := &File{Path: "f.toml", Values: map[string]string{"profile": "throughput"}}
	env := func(name string) (string, bool) { return "edge-tiny", name == "IRONBUS_PROFILE" }
	none := func(string) (string, bool) { return "", false }
	cases := []struct {
		flag   string
		onLine bool
		env    func(string) (string, bool)
		file   *File
		want   string
		source string
	}{
		{"", false, none, nil, "balanced", "default"},
		{"", false, none, file, "throughput", "file:f.toml"},
		{"", false, env, file, "edge-tiny", "env:IRONBUS_PROFILE"},
		{"balanced", true, env, file, "balanced", "flag"},
	}
	for _, c := range cases {
		profile, source, err := SelectProfile(c.flag, c.onLine, c.env, c.file)
		if err != nil || profile.Name != c.want || source.String() != c.source {
			t.Errorf("got %s from %s (%v), want %s from %s", profile.Name, source, err, c.want, c.source)
		}
	}
	if _, _, err := SelectProfile("edge-tniy", true, none, nil); !errors.Is(err, ErrUnknownProfile) || !strings.Contains(err.Error(), `did you mean "edge-tiny"`) {
		t.Errorf("a misspelt profile: %v", err)
	}
}

func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{"IRONBUS_SEGMENT_BYTE=1", "IRONBUS_TEST_LOOP=std", "IRONBUS_LOG_LEVEL=debug", "HOME=/"}, known)
	if len(got) != 1 || got[0] != "IRONBUS_SEGMENT_BYTE (did you mean IRONBUS_SEGMENT_BYTES?)" {
		t.Fatalf("got %q", got)
	}
}

func TestEveryProfileKnobIsDistinct(t *testing.T) {
	for _, profile := range Profiles() {
		if _, err := LookupProfile(profile.Name); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzParseFile: any bytes give a file or a typed error, never a panic,
// and every accepted value belongs to a known knob.
func FuzzParseFile(f *testing.F) {
	for _, seed := range []string{
		"segment_bytes = \"8MiB\"\n", "[retention]\nmax_bytes = 3\n", "a = [1,\n", "max_connections = 1.0e3\n",
		"profile = \"edge-tiny\"\nlog_level = 'debug'\n", "[[x]]\ny = 1\n", "\"segment_bytes\" = true\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ParseFile("fuzz.toml", data, known)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrBadValue) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		var knobs []Knob
		for name := range file.Values {
			if !slices.Contains(known, name) {
				t.Fatalf("accepted unknown knob %q", name)
			}
			knobs = append(knobs, Knob{Name: name, Value: &intValue{}})
		}
		if _, err := Apply(knobs, Layers{File: file}); err != nil {
			var keyErr *KeyError
			if !errors.Is(err, ErrBadValue) || !errors.As(err, &keyErr) || keyErr.Source.Kind != SourceFile {
				t.Fatalf("applying %v: %v", file.Values, err)
			}
		}
	})
}
