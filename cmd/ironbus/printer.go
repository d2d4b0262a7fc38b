package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// errorSchema names the JSON object a failed command prints with --json.
const errorSchema = "ironbus.cli.error.v1"

type errorOutput struct {
	Schema   string `json:"schema"`
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// writeJSON writes v as one line of JSON: the same encoder serves single
// objects and NDJSON streams, and HTML escaping would only mangle payloads.
func writeJSON(w io.Writer, v any) error {
	encoder := json.NewEncoder(w)
	encoder.SetEscapeHTML(false)
	return encoder.Encode(v)
}

// reportFailure tells the user why the command failed: always on stderr as
// "ironbus: <message>", and also as a JSON object on stdout with --json,
// unless the command has already reported the outcome itself.
func reportFailure(opts *globalOptions, cmd *cobra.Command, err error) {
	var exit *exitError
	if errors.As(err, &exit) && exit.reported {
		return
	}
	code := exitCodeOf(err)
	fmt.Fprintf(opts.stderr, "ironbus: %s\n", err.Error())
	if code == exitUsage && cmd != nil {
		fmt.Fprintf(opts.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	if opts.json {
		_ = writeJSON(opts.stdout, errorOutput{Schema: errorSchema, Error: err.Error(), ExitCode: code})
	}
}
