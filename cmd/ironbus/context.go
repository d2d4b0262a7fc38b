package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/clicontext"
)

// contextsSchema names the JSON of `context ls`; contextSchema that of
// `context create` and `context use`.
const (
	contextsSchema = "ironbus.cli.contexts.v1"
	contextSchema  = "ironbus.cli.context.v1"
)

type contextsOutput struct {
	Schema   string               `json:"schema"`
	File     string               `json:"file"`
	Current  string               `json:"current"`
	Contexts []clicontext.Context `json:"contexts"`
}

type contextOutput struct {
	Schema  string             `json:"schema"`
	Context clicontext.Context `json:"context"`
	Current bool               `json:"current"`
}

func newContextCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context create|use|ls",
		Short: "Name a broker (address, TLS, credentials, data directory) and make it the default",
		Long: `A context is a named set of defaults: a broker address, how to reach it
securely (TLS CA, client certificate and key, server name; a token file, or a
user and password file) and a data directory. Once a context is current,
every command that takes --addr uses its address, and every command that
takes only --data-dir uses its data directory, and top, report and server use
its health address and token file, whenever the flag is not given
(IRONBUS_ADDR still wins over the context's address). Commands that take
either (group, dlq, cumulative-ack) talk to the context's broker unless
--data-dir is given.

A context's TLS and credentials go only to its own address: they fill
--tls-* and --token-file/--user/--password-file when the address came from
the context, never when --addr or IRONBUS_ADDR names another broker. TLS
flags given by hand replace the context's TLS settings as a whole, and
credential flags given by hand replace its credentials as a whole.

Contexts live in contexts.json in the user's config directory
(~/.config/ironbus on Linux), or in $IRONBUS_CONFIG_DIR when set. A context
stores the paths of its secret files (token, password, private key), never
the secrets; each must be readable by its owner only (chmod 600), and is
checked when the context is created and every time it is used.`,
		Example: `  ironbus context create pi --addr 10.0.0.7:7777 --data-dir /var/lib/ironbus --use
  ironbus context create lab --addr 192.168.1.20:7777 --token-file ~/.ironbus/lab.token
  ironbus context create cabinet --addr cabinet.local:7777 --tls-ca ca.crt --user ops --password-file ~/.ironbus/ops.pw
  ironbus context ls
  ironbus context use lab`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newContextCreateCmd(opts), newContextUseCmd(opts), newContextListCmd(opts))
	return cmd
}

func newContextCreateCmd(opts *globalOptions) *cobra.Command {
	var created clicontext.Context
	var use, replace bool
	cmd := &cobra.Command{
		Use:   "create NAME [--addr A] [--tls-ca F …] [--token-file F | --user U --password-file F] [--data-dir D] [--use]",
		Short: "Create (or with --replace, overwrite) a context",
		Long: `Create a context named NAME (letters, digits, '.', '_' and '-') holding
any of a broker address, its TLS settings, its credentials and a data
directory. The flags mean what they mean on pub and sub. Relative paths are
stored absolute. A token, password or key file readable by group or others
is refused: run the chmod the message gives. A token file and a user are
alternatives, not a pair; a client certificate needs its key. --use also
makes it the current context.`,
		Example: `  ironbus context create pi --addr 10.0.0.7:7777 --data-dir /var/lib/ironbus --use
  ironbus context create lab --addr 192.168.1.20:7777 --token-file ~/.ironbus/lab.token --replace
  ironbus context create edge --addr 10.0.0.9:7777 --tls-ca ca.crt --tls-cert me.crt --tls-key me.key --use`,
		Args: cobra.ExactArgs(1),
	}
	flags := cmd.Flags()
	// Plain flags, not addAddrFlag/addDataDirFlag: the context's own values
	// must never be filled from the current context.
	flags.StringVar(&created.Addr, "addr", "", "broker address (host:port)")
	flags.StringVar(&created.TokenFile, "token-file", "", "file holding the access token (mode 0600)")
	flags.StringVar(&created.TLSCA, "tls-ca", "", "CA certificate (PEM) to verify the broker with: the context speaks TLS 1.3")
	flags.StringVar(&created.TLSCert, "tls-cert", "", "client certificate (PEM) for a broker that requires mTLS; with --tls-key")
	flags.StringVar(&created.TLSKey, "tls-key", "", "private key of --tls-cert (mode 0600)")
	flags.StringVar(&created.TLSServerName, "tls-server-name", "", "name to expect in the broker's certificate (default: the host of the address)")
	flags.StringVar(&created.User, "user", "", "authenticate as this user; with --password-file")
	flags.StringVar(&created.PasswordFile, "password-file", "", "file holding --user's password on its first line (mode 0600)")
	flags.StringVar(&created.DataDir, "data-dir", "", "the broker's data directory, for the offline commands")
	flags.StringVar(&created.HealthAddr, "health-addr", "", "the broker's health endpoints, for top, report and server (host:port)")
	flags.StringVar(&created.HealthTokenFile, "health-token-file", "", "bearer token file of the health endpoints (mode 0600)")
	flags.BoolVar(&use, "use", false, "also make it the current context")
	flags.BoolVar(&replace, "replace", false, "overwrite a context of the same name")
	flags.BoolVar(&opts.json, "json", false, "print the context as JSON (schema "+contextSchema+")")
	cmd.RunE = classified(func() error {
		created.Name = cmd.Flags().Arg(0)
		store, err := contextStore()
		if err != nil {
			return err
		}
		stored, err := store.Create(created, replace)
		if err != nil {
			return contextError(err, created.Name)
		}
		if use {
			if err := store.Use(stored.Name); err != nil {
				return contextError(err, stored.Name)
			}
		}
		if opts.json {
			return writeJSON(opts.stdout, contextOutput{Schema: contextSchema, Context: stored, Current: use})
		}
		fmt.Fprintf(opts.stdout, "created context %q in %s\n", stored.Name, store.Path())
		if use {
			fmt.Fprintf(opts.stdout, "%q is now the current context\n", stored.Name)
		}
		return nil
	})
	return cmd
}

func newContextUseCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "use NAME",
		Short:   "Make a context the current one",
		Long:    `Make NAME the current context: commands use its address and data directory whenever --addr or --data-dir is not given.`,
		Example: `  ironbus context use pi`,
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the context as JSON (schema "+contextSchema+")")
	cmd.RunE = classified(func() error {
		name := cmd.Flags().Arg(0)
		store, err := contextStore()
		if err != nil {
			return err
		}
		if err := store.Use(name); err != nil {
			return contextError(err, name)
		}
		current, _, err := store.Current()
		if err != nil {
			return contextError(err, name)
		}
		if opts.json {
			return writeJSON(opts.stdout, contextOutput{Schema: contextSchema, Context: current, Current: true})
		}
		fmt.Fprintf(opts.stdout, "%q is now the current context\n", name)
		return nil
	})
	return cmd
}

func newContextListCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "ls",
		Short:   "List the contexts; * marks the current one",
		Long:    `List every context with its address, data directory, TLS and credentials; * marks the current one.`,
		Example: "  ironbus context ls\n  ironbus context ls --json | jq -r .current",
		Args:    cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object (schema "+contextsSchema+")")
	cmd.RunE = classified(func() error {
		store, err := contextStore()
		if err != nil {
			return err
		}
		contexts, current, err := store.List()
		if err != nil {
			return contextError(err, current)
		}
		if opts.json {
			if contexts == nil {
				contexts = []clicontext.Context{}
			}
			return writeJSON(opts.stdout, contextsOutput{Schema: contextsSchema, File: store.Path(), Current: current, Contexts: contexts})
		}
		if len(contexts) == 0 {
			fmt.Fprintf(opts.stdout, "no contexts yet (%s); create one with `ironbus context create NAME --addr HOST:PORT --use`\n", store.Path())
			return nil
		}
		table := tabwriter.NewWriter(opts.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(table, "\tNAME\tADDR\tDATA DIR\tTLS\tCREDENTIALS")
		for _, c := range contexts {
			marker := ""
			if c.Name == current {
				marker = "*"
			}
			fmt.Fprintf(table, "%s\t%s\t%s\t%s\t%s\t%s\n", marker, c.Name, dash(c.Addr), dash(c.DataDir),
				contextTLS(c), contextCredentials(c))
		}
		return table.Flush()
	})
	return cmd
}

// contextTLS summarizes a context's TLS for the table: the paths are in
// --json.
func contextTLS(c clicontext.Context) string {
	switch {
	case c.TLSCert != "":
		return "mtls"
	case c.TLSCA != "" || c.TLSServerName != "":
		return "tls"
	}
	return "-"
}

func contextCredentials(c clicontext.Context) string {
	switch {
	case c.TokenFile != "":
		return "token " + c.TokenFile
	case c.User != "":
		return "user " + c.User
	}
	return "-"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
