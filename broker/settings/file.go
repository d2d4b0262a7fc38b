package settings

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/pelletier/go-toml/v2"
)

// File is a decoded TOML configuration file: every key known, every value
// in the text form its knob's flag parses.
type File struct {
	Path string
	// Values maps a knob name to its value text.
	Values map[string]string
	// Keys maps a knob name to the key as written ("retention.max_bytes"),
	// so an error names what the user typed.
	Keys map[string]string
}

// ParseFile decodes a TOML file against the knob names it may set. A
// table is a prefix: [retention] max_bytes = 1 is retention_max_bytes, the
// knob retention-max-bytes. Strings, whole numbers and booleans are
// accepted; a size or duration with a unit is a string ("8MiB", "500ms").
// Every unknown key and untyped value is reported, joined, in key order.
func ParseFile(path string, data []byte, known []string) (*File, error) {
	var document map[string]any
	if err := toml.Unmarshal(data, &document); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", path, ErrSyntax, syntaxDetail(err))
	}
	file := &File{Path: path, Values: map[string]string{}, Keys: map[string]string{}}
	source := Source{Kind: SourceFile, Detail: path}
	var problems []error
	var visit func(prefix, dotted string, table map[string]any)
	visit = func(prefix, dotted string, table map[string]any) {
		keys := make([]string, 0, len(table))
		for key := range table {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		for _, key := range keys {
			flat, written := prefix+key, dotted+key
			if nested, ok := table[key].(map[string]any); ok {
				visit(flat+"_", written+".", nested)
				continue
			}
			name := nameOfKey(flat)
			if !slices.Contains(known, name) {
				problems = append(problems, unknownKey(written, source, known))
				continue
			}
			if earlier, ok := file.Keys[name]; ok {
				problems = append(problems, &KeyError{Key: written, Source: source, Err: ErrBadValue,
					Hint: fmt.Sprintf("the same knob as %s: keep one of them", earlier)})
				continue
			}
			text, err := valueText(table[key])
			if err != nil {
				problems = append(problems, &KeyError{Key: written, Value: fmt.Sprint(table[key]), Source: source, Err: err,
					Hint: `write a whole number, true or false, or a string with a unit such as "8MiB" or "500ms"`})
				continue
			}
			file.Values[name], file.Keys[name] = text, written
		}
	}
	visit("", "", document)
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return file, nil
}

func unknownKey(written string, source Source, known []string) error {
	keys := make([]string, len(known))
	for i, name := range known {
		keys[i] = Key(name)
	}
	hint := "`ironbus config print` lists every key"
	if suggestion := Suggest(Key(nameOfKey(written)), keys); suggestion != "" {
		hint = fmt.Sprintf("did you mean %s?", suggestion)
	}
	return &KeyError{Key: written, Source: source, Err: ErrUnknownKey, Hint: hint}
}

// valueText renders a decoded TOML scalar as the text a flag parses.
func valueText(value any) (string, error) {
	switch v := value.(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return strconv.FormatInt(int64(v), 10), nil
		}
		return "", fmt.Errorf("%w: a fraction", ErrBadValue)
	}
	return "", fmt.Errorf("%w: a %T is not a knob value", ErrBadValue, value)
}

// syntaxDetail adds the line and column go-toml knows to its message.
func syntaxDetail(err error) string {
	var decode *toml.DecodeError
	if errors.As(err, &decode) {
		row, column := decode.Position()
		return fmt.Sprintf("line %d, column %d: %s", row, column, decode.Error())
	}
	return err.Error()
}
