package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/security"
)

type tokenOutput struct {
	Schema string `json:"schema"`
	Token  string `json:"token,omitempty"`
	File   string `json:"file,omitempty"`
	SHA256 string `json:"sha256"`
}

func newTokenCmd(opts *globalOptions) *cobra.Command {
	token := &cobra.Command{
		Use:   "token",
		Short: "Make bearer tokens for clients",
		Long: `Bearer tokens authenticate clients to a broker run with --auth-config.

A token is 32 random bytes (256 bits), printed once. The auth config stores only
its SHA-256 digest, so a copy of the config does not let anyone in.`,
		Example: `  ironbus token create --out writer.token
  ironbus auth add --auth-config auth.toml --name writer --token-file writer.token --scopes publish`,
		Args: cobra.NoArgs,
	}
	var out string
	create := &cobra.Command{
		Use:   "create [--out FILE]",
		Short: "Print a fresh bearer token (or write it to a 0600 file)",
		Long: `Print a fresh bearer token from 32 random bytes, with its SHA-256 digest.

With --out the token goes into a new file of mode 0600 instead of the terminal
(it must not exist yet): hand that file to the client (--token-file) and to
'ironbus auth add --token-file', which stores the digest.`,
		Example: `  ironbus token create
  ironbus token create --out /etc/ironbus/writer.token
  ironbus token create --json | jq -r .token`,
		Args: cobra.NoArgs,
	}
	create.Flags().StringVar(&out, "out", "", "write the token to this new file (mode 0600) instead of printing it")
	create.Flags().BoolVar(&opts.json, "json", false, "print JSON (schema ironbus.cli.token.v1)")
	create.RunE = classified(func() error { return runTokenCreate(opts, out) })
	token.AddCommand(create)
	return token
}

func runTokenCreate(opts *globalOptions, out string) error {
	token, err := security.NewToken()
	if err != nil {
		return exitErrorf(exitInternal, "%w", err)
	}
	result := tokenOutput{Schema: "ironbus.cli.token.v1", SHA256: security.TokenDigest(token)}
	if out != "" {
		file, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return exitErrorf(exitUsage, "--out: %w (pick a path that does not exist yet)", err)
		}
		_, err = fmt.Fprintln(file, token)
		if err = firstError(err, file.Sync(), file.Close()); err != nil {
			return exitErrorf(exitInternal, "--out: %w", err)
		}
		result.File = out
	} else {
		result.Token = token
	}
	if opts.json {
		return writeJSON(opts.stdout, result)
	}
	if out != "" {
		fmt.Fprintf(opts.stdout, "token written to %s (sha256 %s)\n", out, result.SHA256)
		return nil
	}
	fmt.Fprintln(opts.stdout, token)
	return nil
}
