package settings

// SourceKind is the layer a knob's value came from, lowest first: a
// higher layer overrides every lower one.
type SourceKind int

const (
	SourceDefault SourceKind = iota
	SourceProfile
	SourceFile
	SourceEnv
	SourceFlag
)

// Source is where a value came from, printed as default, profile:NAME,
// file:PATH, env:IRONBUS_X or flag.
type Source struct {
	Kind SourceKind
	// Detail is the profile name, file path or variable name.
	Detail string
}

func (s Source) String() string {
	switch s.Kind {
	case SourceProfile:
		return "profile:" + s.Detail
	case SourceFile:
		return "file:" + s.Detail
	case SourceEnv:
		return "env:" + s.Detail
	case SourceFlag:
		return "flag"
	}
	return "default"
}
