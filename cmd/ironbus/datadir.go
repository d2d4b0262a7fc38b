package main

import (
	"errors"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/datadir"
	"github.com/ironbus/ironbus/security"
	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// lockedMessage is what every command says when a broker holds the
// directory: the fix is an action, not a retry.
const lockedMessage = "a broker is running on this directory; stop it or use the live commands"

// logSelection is the flags that name a data directory and one log in it.
type logSelection struct {
	dataDir   string
	stream    string
	partition uint32
}

func addDataDirFlag(cmd *cobra.Command, target *string) {
	cmd.Flags().StringVar(target, "data-dir", "",
		"the broker's data directory, the one holding FORMAT and streams/ (required; or the current context's)")
	markContextFlag(cmd, "data-dir", contextDataDir)
}

func addLogFlags(cmd *cobra.Command, selection *logSelection) {
	addDataDirFlag(cmd, &selection.dataDir)
	cmd.Flags().StringVar(&selection.stream, "stream", segment.DefaultStream, "stream to read")
	cmd.Flags().Uint32Var(&selection.partition, "partition", 0, "partition of the stream to read")
}

// requireDataDir gives a missing --data-dir its own message: cobra's
// generic "required flag" text does not say what the directory is.
func requireDataDir(dataDir string) error {
	if dataDir == "" {
		return exitErrorf(exitUsage, "--data-dir is required: name the broker's data directory (the one holding FORMAT and streams/)")
	}
	return notADirectory(dataDir)
}

// notADirectory refuses a --data-dir that names a file, or a path through
// one, with what to do; nil when it is a directory or does not exist (the
// command itself says what a missing directory means for it).
func notADirectory(dataDir string) error {
	info, err := os.Stat(dataDir)
	switch {
	case err == nil && !info.IsDir():
		return exitErrorf(exitNotFound, "--data-dir %s is a file, not a directory: name the broker's data directory "+
			"(the one holding FORMAT and streams/), such as the --data-dir given to ironbus serve", dataDir)
	case errors.Is(err, syscall.ENOTDIR):
		return exitErrorf(exitNotFound, "--data-dir %s passes through a file, not a directory: name the broker's data directory "+
			"(the one holding FORMAT and streams/)", dataDir)
	}
	return nil
}

// validateStream checks a stream name, or the operator account's
// ACCOUNT/STREAM (docs/SECURITY.md, "Accounts").
func validateStream(stream string) error {
	if account, name, ok := strings.Cut(stream, "/"); ok {
		if err := security.ValidateAccount(account); err != nil {
			return exitErrorf(exitUsage, "--stream: %w", err)
		}
		stream = name
	}
	if err := segment.ValidateStreamName(stream); err != nil {
		return exitErrorf(exitUsage, "--stream: %w", err)
	}
	return nil
}

func (selection *logSelection) validate() error {
	if err := requireDataDir(selection.dataDir); err != nil {
		return err
	}
	return validateStream(selection.stream)
}

func (selection *logSelection) logID() segment.LogID {
	return segment.LogID{Stream: selection.stream, Partition: selection.partition}
}

// openDataDir opens the directory read-only (datadir.OpenReadOnly), which
// is what makes every offline reader safe beside a broker.
func openDataDir(opts *globalOptions, dataDir string) (*segment.Dir, error) {
	dir, err := datadir.OpenReadOnly(vfs.OS{}, dataDir, opts.logger(), nil)
	if err != nil {
		return nil, openDirError(dataDir, err)
	}
	return dir, nil
}

// requireExistingDataDir refuses, before anything opens it exclusively
// (which would create it), a --data-dir that is not an IronBus data
// directory: the offline commands that change one never make one.
func requireExistingDataDir(dataDir string) error {
	if _, err := segment.ReadDataFormatVersion(vfs.OS{}, dataDir); err != nil {
		return openDirError(dataDir, err)
	}
	return nil
}

func openDirError(dataDir string, err error) error {
	if refused := notADirectory(dataDir); refused != nil {
		return refused
	}
	if refused := keyRingError(dataDir, err); refused != nil {
		return refused
	}
	switch {
	case errors.Is(err, segment.ErrLocked):
		return exitErrorf(exitLocked, "%s: %s (%w)", dataDir, lockedMessage, err)
	case errors.Is(err, segment.ErrNotFound):
		return exitErrorf(exitNotFound, "%w; check --data-dir: it must name the broker's data directory", err)
	case errors.Is(err, segment.ErrTooNew):
		return exitErrorf(exitUnreadable, "%w", err)
	case errors.Is(err, segment.ErrInvalidOptions):
		return exitErrorf(exitInternal, "internal error: %w", err)
	}
	return exitErrorf(exitUnreadable, "cannot open data directory %s: %w", dataDir, err)
}

// openLogError classifies a failure to open one log of an open directory.
func openLogError(dataDir string, id segment.LogID, err error) error {
	if errors.Is(err, segment.ErrNotFound) {
		return exitErrorf(exitNotFound, "log %s does not exist in %s; `ironbus verify --data-dir %s` lists the logs it holds (%w)",
			id.String(), dataDir, dataDir, err)
	}
	return exitErrorf(exitUnreadable, "cannot open log %s: %w", id.String(), err)
}
