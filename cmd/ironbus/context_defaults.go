package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ironbus/ironbus/clicontext"
)

// contextAnnotation marks the flags the current context may fill: the
// broker address a client command connects to and the data directory.
// serve's and dev's --addr (where to listen) are deliberately not marked.
const contextAnnotation = "ironbus/context-default"

const (
	contextAddr       = "addr"
	contextDataDir    = "data_dir"
	contextHealthAddr = "health_addr"
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
// when the command takes them and they were not given (nor IRONBUS_ADDR);
// with the context's address come its TLS and credentials.
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
	if health := targets[contextHealthAddr]; health != nil {
		return applyContextHealth(cmd, health)
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
		if err := current.CheckSecrets(); err != nil {
			return contextError(err, current.Name)
		}
		if err := applyContextConnect(cmd, current); err != nil {
			return err
		}
		return addr.Value.Set(current.Addr)
	}
	if dataDir != nil && addr == nil && current.DataDir != "" {
		return dataDir.Value.Set(current.DataDir)
	}
	return nil
}

// applyContextHealth fills --health-addr, and with it
// --health-token-file unless given, from the current context when
// --health-addr was not given: the context's token goes only to its own
// endpoints.
func applyContextHealth(cmd *cobra.Command, addr *pflag.Flag) error {
	if addr.Changed {
		return nil
	}
	store, err := contextStore()
	if err != nil {
		return err
	}
	current, ok, err := store.Current()
	if err != nil {
		return exitErrorf(exitUnreadable, "%w (fix it with `ironbus context create|use`, or remove %s)", err, store.Path())
	}
	if !ok || current.HealthAddr == "" {
		return nil
	}
	if token := cmd.Flags().Lookup("health-token-file"); token != nil && !token.Changed && current.HealthTokenFile != "" {
		if err := clicontext.CheckSecretFile(current.HealthTokenFile); err != nil {
			return contextError(err, current.Name)
		}
		_ = token.Value.Set(current.HealthTokenFile)
	}
	return addr.Value.Set(current.HealthAddr)
}

// The connect flags (connect.go) a context fills, in two groups: TLS and
// credentials. A group is taken from the context whole or not at all, so
// a hand-given --user never meets the context's --token-file (which the
// verb would refuse as two kinds of credentials).
var (
	contextTLSFlags        = []string{"tls-ca", "tls-cert", "tls-key", "tls-server-name"}
	contextCredentialFlags = []string{"token-file", "user", "password-file"}
)

// applyContextConnect fills the connect flags of a client verb from the
// context whose address it is about to use. Only then: the context's
// token is for its own broker, never for one --addr names by hand.
func applyContextConnect(cmd *cobra.Command, current clicontext.Context) error {
	values := map[string]string{
		"tls-ca": current.TLSCA, "tls-cert": current.TLSCert, "tls-key": current.TLSKey,
		"tls-server-name": current.TLSServerName,
		"token-file":      current.TokenFile, "user": current.User, "password-file": current.PasswordFile,
	}
	for _, group := range [][]string{contextTLSFlags, contextCredentialFlags} {
		if anyFlagChanged(cmd, group) {
			continue
		}
		for _, name := range group {
			flag := cmd.Flags().Lookup(name)
			if flag == nil || values[name] == "" {
				continue // not a client verb, or the context leaves it unset
			}
			if err := flag.Value.Set(values[name]); err != nil {
				return exitErrorf(exitUsage, "context %q: --%s: %w", current.Name, name, err)
			}
		}
	}
	return nil
}

func anyFlagChanged(cmd *cobra.Command, names []string) bool {
	for _, name := range names {
		if flag := cmd.Flags().Lookup(name); flag != nil && flag.Changed {
			return true
		}
	}
	return false
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
	case errors.Is(err, clicontext.ErrInvalidName), errors.Is(err, clicontext.ErrConflict):
		return exitErrorf(exitUsage, "%w", err)
	case errors.Is(err, clicontext.ErrCorrupt):
		return exitErrorf(exitUnreadable, "%w", err)
	}
	return exitErrorf(exitUsage, "context %q: %w", name, err)
}
