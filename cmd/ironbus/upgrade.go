package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/internal/upgrade"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

const upgradeSchema = "ironbus.cli.upgrade.v1"

type upgradeOptions struct {
	newBinary string
	dest      string
	dataDir   string
}

// upgradeOutput is the --json form of `ironbus upgrade` and `ironbus
// rollback` (the schema names which).
type upgradeOutput struct {
	Schema        string   `json:"schema"`
	Dest          string   `json:"dest"`
	Previous      string   `json:"previous,omitempty"`
	Version       string   `json:"version,omitempty"` // of the binary now installed, when probed
	SHA256        string   `json:"sha256"`
	Bytes         int64    `json:"bytes"`
	DataDirFormat int      `json:"data_dir_format,omitempty"` // when --data-dir was checked
	Resumed       bool     `json:"resumed,omitempty"`
	Steps         []string `json:"steps"`
}

func newUpgradeCmd(opts *globalOptions) *cobra.Command {
	options := &upgradeOptions{}
	cmd := &cobra.Command{
		Use:   "upgrade --new-binary FILE --dest PATH [--data-dir DIR]",
		Short: "Install a new ironbus binary by an atomic, crash-safe swap that keeps the old one",
		Long: `Replace the installed ironbus binary with a new one, keeping the old one
beside it as PATH.previous for ironbus rollback.

First the new binary must run here: upgrade runs 'FILE version --json' and
stops if it fails (another architecture, a truncated download). With
--data-dir it also compares the data directory's format with the formats
the new binary understands, and refuses a binary that would refuse the
directory. The directory is only read: no lock, so the broker may keep
running.

Then three steps, each durable before the next (fsync of the file, rename,
fsync of the directory), so a crash at any point leaves PATH a complete
binary, old or new, and running the same command again finishes the job:

  stage  copy FILE to PATH.new and fsync it
  keep   hard-link PATH to PATH.previous
  swap   rename PATH.new to PATH

The running broker keeps its old binary until it restarts: restart it
(systemctl restart ironbus) to run the new one.

Exit codes: 0 installed, 1 usage, 2 FILE or the data directory not found,
4 FILE does not run here, is too old for the data directory, or a step
failed (the message says which; PATH is unchanged or complete).`,
		Example: `  ironbus upgrade --new-binary ./ironbus-v1.3.0-linux-arm64 --dest /usr/local/bin/ironbus \
    --data-dir /var/lib/ironbus
  systemctl restart ironbus

  # undo
  ironbus rollback --dest /usr/local/bin/ironbus`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&options.newBinary, "new-binary", "", "the binary to install (required)")
	cmd.Flags().StringVar(&options.dest, "dest", "", "where the installed binary lives, e.g. /usr/local/bin/ironbus (required)")
	cmd.Flags().StringVar(&options.dataDir, "data-dir", "", "also check that the new binary understands this data directory")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+upgradeSchema+")")
	cmd.RunE = classified(func() error { return runUpgrade(opts, options) })
	return cmd
}

func runUpgrade(opts *globalOptions, options *upgradeOptions) error {
	if options.newBinary == "" || options.dest == "" {
		return exitErrorf(exitUsage, "--new-binary and --dest are required: the binary to install and where it goes")
	}
	newBinary, err := resolveNewBinary(options.newBinary)
	if err != nil {
		return err
	}
	options.newBinary = newBinary
	if info, err := os.Stat(options.dest); err == nil && info.IsDir() {
		return exitErrorf(exitUsage, "--dest %s is a directory; name the installed binary itself, such as %s",
			options.dest, filepath.Join(options.dest, "ironbus"))
	}
	identity, err := upgrade.Probe(context.Background(), options.newBinary)
	if err != nil {
		return upgradeError(err)
	}
	output := upgradeOutput{Schema: upgradeSchema, Version: identity.Version}
	upgradeProgress(opts, "checked %s: ironbus %s for %s/%s, data dir format %d",
		options.newBinary, identity.Version, identity.OS, identity.Arch, identity.Formats.DataDir)
	if options.dataDir != "" {
		format, err := checkDataDirFormat(options.dataDir, identity, options.newBinary)
		if err != nil {
			return err
		}
		output.DataDirFormat = format
		upgradeProgress(opts, "checked %s: data dir format %d, understood", options.dataDir, format)
	}
	result, err := upgrade.Upgrade(options.newBinary, options.dest, stepPrinter(opts, &output))
	if err != nil {
		return upgradeError(err)
	}
	return printInstalled(opts, output, result, "ironbus rollback --dest "+options.dest+" puts the previous binary back")
}

// resolveNewBinary makes --new-binary an absolute path: it names a file,
// never a command to look up in PATH, so "ironbus-new" is the file in the
// current directory. A missing, non-regular or non-executable file is
// refused here with what to do, before anything runs it.
func resolveNewBinary(name string) (string, error) {
	path, err := filepath.Abs(name)
	if err != nil {
		return "", exitErrorf(exitUsage, "--new-binary %q: %w", name, err)
	}
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", exitErrorf(exitNotFound, "--new-binary %s: no such file; name the downloaded ironbus binary (a path, not a command in PATH)", path)
	case err != nil:
		return "", exitErrorf(exitUnreadable, "--new-binary %s: %w", path, err)
	case info.IsDir():
		return "", exitErrorf(exitUsage, "--new-binary %s is a directory; name the ironbus binary inside it", path)
	case !info.Mode().IsRegular():
		return "", exitErrorf(exitUsage, "--new-binary %s is not a regular file; name the downloaded ironbus binary", path)
	case runtime.GOOS != "windows" && info.Mode().Perm()&0o111 == 0: // Windows has no execute bit
		return "", exitErrorf(exitUsage, "--new-binary %s is not executable; run chmod +x %s first", path, path)
	}
	return path, nil
}

// checkDataDirFormat refuses a binary older than the data directory: it
// would refuse to start on it.
func checkDataDirFormat(dataDir string, identity upgrade.Identity, binary string) (int, error) {
	format, err := segment.ReadDataFormatVersion(vfs.OS{}, dataDir)
	if err != nil {
		return 0, openDirError(dataDir, err)
	}
	if format > identity.Formats.DataDir {
		return 0, exitErrorf(exitUnreadable,
			"%s understands data directory format %d, but %s is format %d: it would refuse to start on it; use a binary whose `version` lists data dir %d or newer",
			binary, identity.Formats.DataDir, dataDir, format, format)
	}
	return format, nil
}

// stepPrinter reports each durable step as it completes, so an operator
// watching a slow SD card sees where it is.
func stepPrinter(opts *globalOptions, output *upgradeOutput) upgrade.Options {
	return upgrade.Options{AfterStep: func(step upgrade.Step, detail string) error {
		output.Steps = append(output.Steps, string(step))
		upgradeProgress(opts, "%-7s %s", step, detail)
		return nil
	}}
}

// upgradeProgress prints a line for a human; --json prints only the final object.
func upgradeProgress(opts *globalOptions, format string, args ...any) {
	if !opts.json {
		fmt.Fprintf(opts.stdout, format+"\n", args...)
	}
}

func printInstalled(opts *globalOptions, output upgradeOutput, result upgrade.Result, hint string) error {
	output.Dest, output.Previous, output.SHA256, output.Bytes = result.Dest, result.Previous, result.SHA256, result.Bytes
	output.Resumed = result.Resumed
	if output.Steps == nil {
		output.Steps = []string{}
	}
	if opts.json {
		return writeJSON(opts.stdout, output)
	}
	printSummary(opts.stdout, output, hint)
	return nil
}

func printSummary(w io.Writer, output upgradeOutput, hint string) {
	fmt.Fprintf(w, "installed %s (%d bytes, sha256 %s)\n", output.Dest, output.Bytes, output.SHA256)
	if output.Previous != "" {
		fmt.Fprintf(w, "previous binary kept at %s; %s\n", output.Previous, hint)
	}
	fmt.Fprintln(w, "a running broker still runs the binary it started with: restart it (systemctl restart ironbus)")
}

// upgradeError classifies a failure of the upgrade package.
func upgradeError(err error) error {
	switch {
	case errors.Is(err, upgrade.ErrNotBinary) && errors.Is(err, fs.ErrNotExist):
		return exitErrorf(exitNotFound, "%w", err)
	case errors.Is(err, upgrade.ErrNotBinary):
		return exitErrorf(exitUnreadable, "%w; check that it is built for this machine (`file` shows the architecture) and complete (compare with SHA256SUMS)", err)
	case errors.Is(err, upgrade.ErrSameFile):
		return exitErrorf(exitUsage, "%w: --new-binary must be a different file, such as a downloaded release", err)
	case errors.Is(err, upgrade.ErrNoPrevious):
		return exitErrorf(exitNotFound, "%w", err)
	}
	return exitErrorf(exitUnreadable, "%w; the installed binary is unchanged or complete: fix the cause and run the command again", err)
}
