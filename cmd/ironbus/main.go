// Command ironbus is the IronBus command line: the broker (serve, dev), the
// live client commands (pub, sub) and the offline tools on a data
// directory. Every command lives in its own file; docs/CLI.md is the manual.
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run builds the command tree, executes it and maps the outcome to the
// process exit code. It holds no state beyond one call, so every run
// starts from defaults.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	opts := &globalOptions{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCmd(opts)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err != nil {
		reportFailure(opts, cmd, err)
	}
	return exitCodeOf(err)
}
