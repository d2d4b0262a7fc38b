package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ironbus/ironbus/cmd/ironbus/internal/clicontext"
)

// contextAnnotation marks the flags the current context may fill: the
// broker address a client command connects to and the data directory.
// serve's and dev's --addr (where to listen) are deliberately not marked.
const contextAnnotation = "ironbus/context-default"

const (
	contextAddr    = "addr"
	contextDataDir = "data_dir"
)

func markContextFlag(cmd *cobra.Command, flag, kind string) {
	_ = cmd.Flags().SetAnnotation(flag, contextAnnotation, []string{kind})
}

func contextStore() (*clicontext.Store, error) {
	dir, err := clicontext.DefaultDir(os.Getenv)
	if err != nil {
		return nil, exitErrorf(exitUsage, "%w", err)
	}
	return clicontext.NewStore(dir), nil
}

// applyCurrentContext fills --addr and --data-dir from the current context
// when the command takes them and they were not given (nor IRONBUS_ADDR).
// A command that takes both (live or offline) gets only the address: the
// live mode is the default, and --data-dir given by hand picks offline.
func applyCurrentContext(cmd *cobra.Command, _ []string) error {
	targets := map[string]*pflag.Flag{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if kind := f.Annotations[contextAnnotation]; len(kind) == 1 {
			targets[kind[0]] = f
		}
	})
	if len(targets) == 0 {
		return nil // not a command a context applies to: never read the file
	}
	addr, dataDir := targets[contextAddr], targets[contextDataDir]
	if (addr != nil && addr.Changed) || (dataDir != nil && dataDir.Changed) {
		return nil // the user chose where this command works
	}
	store, err := contextStore()
	if err != nil {
		return err
	}
	current, ok, err := store.Current()
	if err != nil {
		return exitErrorf(exitUnreadable, "%w (fix it with `ironbus context create|use`, or remove %s)", err, store.Path())
	}
	if !ok {
		return nil
	}
	if addr != nil && os.Getenv("IRONBUS_ADDR") == "" && current.Addr != "" {
		if current.TokenFile != "" {
			if err := clicontext.CheckSecretFile(current.TokenFile); err != nil {
				return contextError(err, current.Name)
			}
		}
		return addr.Value.Set(current.Addr)
	}
	if dataDir != nil && addr == nil && current.DataDir != "" {
		return dataDir.Value.Set(current.DataDir)
	}
	return nil
}

// contextError maps the store's errors to exit codes and advice.
func contextError(err error, name string) error {
	switch {
	case errors.Is(err, clicontext.ErrNotFound):
		return exitErrorf(exitNotFound, "%w; `ironbus context ls` lists the contexts", err)
	case errors.Is(err, clicontext.ErrInsecureSecret):
		return exitErrorf(exitUsage, "context %q: %w", name, err)
	case errors.Is(err, clicontext.ErrExists):
		return exitErrorf(exitUsage, "%w; pass --replace to overwrite it", err)
	case errors.Is(err, clicontext.ErrInvalidName):
		return exitErrorf(exitUsage, "%w", err)
	case errors.Is(err, clicontext.ErrCorrupt):
		return exitErrorf(exitUnreadable, "%w", err)
	}
	return exitErrorf(exitUsage, "context %q: %w", name, err)
}
