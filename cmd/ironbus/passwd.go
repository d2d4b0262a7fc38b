package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/security"
)

type passwdOptions struct {
	memory      int64
	iterations  uint32
	parallelism uint8
}

func newPasswdCmd(opts *globalOptions) *cobra.Command {
	passwd := &passwdOptions{memory: int64(security.DefaultArgon2id.MemoryKiB) << 10,
		iterations: security.DefaultArgon2id.Iterations, parallelism: security.DefaultArgon2id.Parallelism}
	cmd := &cobra.Command{
		Use:   "passwd",
		Short: "Hash a password (read from stdin) for the auth config",
		Long: `Read a password from the first line of standard input and print its Argon2id
hash in the PHC string form ($argon2id$v=19$m=...,t=...,p=...$salt$key), which
carries its own parameters. Put it in the auth config as password_hash, or let
'ironbus auth add --password-stdin' do both steps.

Each login costs the broker one hash: --memory of RAM for about --iterations
passes. The broker verifies one password at a time, so the memory is needed
once, not per client; on a small device pick --memory to fit its RAM ceiling.`,
		Example: `  printf '%s\n' "$PASSWORD" | ironbus passwd
  ironbus passwd --memory 16MiB --iterations 4 < password.txt`,
		Args: cobra.NoArgs,
	}
	flags := cmd.Flags()
	flags.Var(sizeValue{&passwd.memory}, "memory", "Argon2id memory per hash (64MiB; 19MiB to 1GiB)")
	flags.Uint32Var(&passwd.iterations, "iterations", passwd.iterations, "Argon2id passes (1 to 64)")
	flags.Uint8Var(&passwd.parallelism, "parallelism", passwd.parallelism, "Argon2id lanes")
	flags.BoolVar(&opts.json, "json", false, "print JSON (schema ironbus.cli.passwd.v1)")
	cmd.RunE = classified(func() error {
		password, err := readPasswordLine(opts)
		if err != nil {
			return err
		}
		hash, err := passwd.hash(password)
		if err != nil {
			return err
		}
		if opts.json {
			return writeJSON(opts.stdout, map[string]string{"schema": "ironbus.cli.passwd.v1", "hash": hash})
		}
		fmt.Fprintln(opts.stdout, hash)
		return nil
	})
	return cmd
}

func (passwd *passwdOptions) hash(password string) (string, error) {
	params := security.Argon2idParams{MemoryKiB: uint32(passwd.memory >> 10), Iterations: passwd.iterations, Parallelism: passwd.parallelism}
	if params.MemoryKiB > 1<<20 || params.Iterations < 1 || params.Iterations > 64 || params.Parallelism < 1 {
		return "", exitErrorf(exitUsage, "--memory must be 19MiB to 1GiB, --iterations 1 to 64, --parallelism at least 1")
	}
	if err := security.CheckArgon2id(params); err != nil {
		return "", exitErrorf(exitUsage, "%w", err)
	}
	hash, err := security.HashPassword(password, params)
	if err != nil {
		return "", exitErrorf(exitInternal, "%w", err)
	}
	return hash, nil
}

// readPasswordLine reads the password from the first line of stdin.
func readPasswordLine(opts *globalOptions) (string, error) {
	line, err := bufio.NewReader(opts.stdin).ReadString('\n')
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		if err != nil && !errors.Is(err, io.EOF) {
			return "", exitErrorf(exitUsage, "reading the password from stdin: %w", err)
		}
		return "", exitErrorf(exitUsage, "no password on stdin: pipe it in, for example printf '%%s\\n' \"$PASSWORD\" | ironbus passwd")
	}
	return line, nil
}
