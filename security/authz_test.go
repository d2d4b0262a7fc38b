package security

import "testing"

// TestPatternNeverMatchesEmptyTokens: no pattern stands for the empty
// name (the name of broker-wide requests), and a wildcard never stands
// for an empty token; ">" alone still covers every name, dead-letter
// queues included.
func TestPatternNeverMatchesEmptyTokens(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", false}, {">", "", false}, {"*.>", "", false},
		{"orders.*", "orders.", false}, {"orders.>", "orders.", false}, {"*.eu", ".eu", false},
		{"a.*.b", "a..b", false}, {"a..b", "a..b", true},
		{">", ".dlq.orders", true}, {".dlq.>", ".dlq.orders.eu", true}, {".dlq.*", ".dlq.orders", true},
		{"*.dlq.orders", ".dlq.orders", false}, {"orders.>", ".dlq.orders.eu", false},
	}
	for _, c := range cases {
		p, err := ParsePattern(c.pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", c.pattern, err)
		}
		if got := p.Match(c.name); got != c.want {
			t.Errorf("%q matches %q = %v, want %v", c.pattern, c.name, got, c.want)
		}
		if got := p.MatchBytes([]byte(c.name)); got != c.want {
			t.Errorf("%q matches bytes %q = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}
