package settings

import "strings"

// EnvPrefix starts every environment variable that sets a knob.
const EnvPrefix = "IRONBUS_"

// Key is the TOML key of a knob: its flag name with underscores, since
// TOML keys with dashes need no quoting but read like arithmetic to most.
func Key(name string) string { return strings.ReplaceAll(name, "-", "_") }

// EnvName is the environment variable of a knob: IRONBUS_ and its key in
// capitals.
func EnvName(name string) string { return EnvPrefix + strings.ToUpper(Key(name)) }

// nameOfKey maps a file key back to a knob name.
func nameOfKey(key string) string { return strings.ReplaceAll(key, "_", "-") }

// Suggest returns the candidate closest to word by edit distance, or ""
// when none is close enough to be a plausible typo (a third of the
// word's length, at least two edits).
func Suggest(word string, candidates []string) string {
	best, bestDistance := "", max(2, len(word)/3)+1
	for _, candidate := range candidates {
		if d := editDistance(word, candidate); d < bestDistance {
			best, bestDistance = candidate, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	previous := make([]int, len(b)+1)
	current := make([]int, len(b)+1)
	for j := range previous {
		previous[j] = j
	}
	for i := 1; i <= len(a); i++ {
		current[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			current[j] = min(previous[j]+1, current[j-1]+1, previous[j-1]+cost)
		}
		previous, current = current, previous
	}
	return previous[len(b)]
}
