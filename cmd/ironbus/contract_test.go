package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// withoutJSON are the commands that print no report a script could parse,
// with the reason: their output is the product itself.
var withoutJSON = map[string]string{
	"ironbus help":       "cobra's help text",
	"ironbus completion": "a shell script for the shell to source",
}

// TestEveryCommandTakesJSON: the CLI contract promises --json on every
// command (docs/CLI.md, "Rules every command follows"), so a command added
// without it fails here rather than in a user's script.
func TestEveryCommandTakesJSON(t *testing.T) {
	root := newRootCmd(&globalOptions{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for prefix := range withoutJSON {
			if cmd.CommandPath() == prefix || strings.HasPrefix(cmd.CommandPath(), prefix+" ") {
				return
			}
		}
		if cmd.Runnable() && !cmd.Hidden && cmd.Flags().Lookup("json") == nil && cmd.InheritedFlags().Lookup("json") == nil {
			t.Errorf("%s has no --json flag", cmd.CommandPath())
		}
		for _, child := range cmd.Commands() {
			walk(child)
		}
	}
	walk(root)
}
