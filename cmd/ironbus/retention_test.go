package main

import (
	"strings"
	"testing"
)

// TestServeRetentionFlagErrors: a retention knob that cannot work exits 1
// and names the flag and what to change, before anything is served.
func TestServeRetentionFlagErrors(t *testing.T) {
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"--retention-policy", "keep-some"}, "--retention-policy"},
		{[]string{"--disk-full-policy", "panic"}, "--disk-full-policy"},
		{[]string{"--disk-headroom", "1MiB"}, "needs --disk-budget"},
		{[]string{"--disk-budget", "1MiB", "--segment-bytes", "1MiB"}, "raise the budget or lower the segment size"},
		{[]string{"--retention-bytes", "lots"}, "retention-bytes"},
	}
	for _, c := range cases {
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0"}, c.args...)
		result := runCLI(t, args...)
		expectCode(t, result, exitUsage)
		if !strings.Contains(result.stderr, c.says) {
			t.Errorf("%v: stderr %q does not say %q", c.args, result.stderr, c.says)
		}
	}
}
