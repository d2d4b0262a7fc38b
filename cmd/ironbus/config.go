package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ironbus/ironbus/broker/settings"
	"github.com/ironbus/ironbus/server"
)

func newConfigCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check a configuration file, or print the configuration serve would run",
		Long: `Every serve flag is a setting that can also come from a TOML file (--config),
an environment variable or a profile. The key of flag --segment-bytes is
segment_bytes in the file and IRONBUS_SEGMENT_BYTES in the environment.
Precedence, highest first: flag > environment > file > profile > default.

  check FILE   refuse unknown keys (with the key meant), bad values and
               combinations that do not go together; exit 0 when serve would
               accept the file, 1 when not
  print        the effective value of every setting and where it came from

See docs/CONFIG.md.`,
		Example: `  ironbus config check /etc/ironbus/ironbus.toml
  ironbus config print --config /etc/ironbus/ironbus.toml --profile edge-tiny
  IRONBUS_MAX_CONNECTIONS=64 ironbus config print --json`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newConfigCheckCmd(opts), newConfigPrintCmd(opts))
	return cmd
}

func newConfigCheckCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a configuration file as serve would read it",
		Long: `Check a TOML configuration file the way serve --config reads it: every key
must name a setting (an unknown one is named, with the closest known key),
every value must parse (sizes and durations carry units: "8MiB", "500ms"),
and the settings must go together with the file's profile and the defaults:
relaxed durability needs its consent, memory storage its consent and cap,
and the RAM budget must fit ram_ceiling. The environment is not read: this
checks the file alone.

Exit codes: 0 serve would accept it, 1 it would not, 2 no such file.`,
		Example: `  ironbus config check /etc/ironbus/ironbus.toml
  ironbus config check ironbus.toml --json`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the outcome as JSON (schema ironbus.cli.config-check.v1)")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		return classified(func() error { return runConfigCheck(opts, args[0]) })(cmd, args)
	}
	return cmd
}

// configCheckOutput is the --json form of config check.
type configCheckOutput struct {
	Schema  string `json:"schema"`
	File    string `json:"file"`
	Valid   bool   `json:"valid"`
	Profile string `json:"profile"`
	Keys    int    `json:"keys"`
}

func runConfigCheck(opts *globalOptions, path string) error {
	serveCmd, serve := newServeCommand(&globalOptions{stdout: io.Discard, stderr: io.Discard})
	serve.config.file = path
	noEnv := func(string) (string, bool) { return "", false }
	resolved, err := resolveConfig(serveCmd.Flags(), &serve.config, noEnv)
	if err != nil {
		return err
	}
	serve.config.resolved = resolved
	if err := checkServeConfig(serve); err != nil {
		return resolved.withSources(err)
	}
	if opts.json {
		return writeJSON(opts.stdout, configCheckOutput{Schema: "ironbus.cli.config-check.v1", File: path, Valid: true,
			Profile: resolved.profile.Name, Keys: len(resolved.file.Values)})
	}
	fmt.Fprintf(opts.stdout, "%s: valid (%d keys, profile %s)\n", path, len(resolved.file.Values), resolved.profile.Name)
	return nil
}

// checkServeConfig runs every check serve runs before opening the data
// directory: each setting alone, the coupled ones, and the RAM budget
// against the ceiling.
func checkServeConfig(serve *serveOptions) error {
	budget, err := serve.cfg.Budget()
	if err != nil {
		return serverError(err)
	}
	return serverError(budget.Check())
}

func newConfigPrintCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "print [serve flags]",
		Short: "Print every setting serve would run with, and where each came from",
		Long: `Print the configuration serve would run with, given the same flags, file and
environment: one line per setting with its file key, value and source
(default, profile:NAME, file:PATH, env:IRONBUS_X or flag). It takes every
serve flag. The settings are checked as serve checks them; a configuration
serve would refuse exits 1 with the reason.`,
		Example: `  ironbus config print
  ironbus config print --config /etc/ironbus/ironbus.toml
  ironbus config print --profile edge-tiny --max-connections 64 --json`,
		Args: cobra.NoArgs,
	}
	serveCmd, serve := newServeCommand(&globalOptions{stdout: io.Discard, stderr: io.Discard})
	serveCmd.Flags().VisitAll(func(flag *pflag.Flag) {
		if flag.Name != "json" && flag.Name != "help" && flag.Name != "profile-out" && flag.Name != "print-budget" {
			cmd.Flags().AddFlag(flag)
		}
	})
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the settings as JSON (schema ironbus.cli.config.v1)")
	cmd.RunE = classified(func() error { return runConfigPrint(opts, cmd.Flags(), serve) })
	return cmd
}

// configOutput is the --json form of config print.
type configOutput struct {
	Schema        string        `json:"schema"`
	Profile       string        `json:"profile"`
	ProfileSource string        `json:"profile_source"`
	File          string        `json:"file,omitempty"`
	Settings      []settingLine `json:"settings"`
}

type settingLine struct {
	Key        string `json:"key"`
	Flag       string `json:"flag"`
	Env        string `json:"env"`
	Value      string `json:"value"`
	Source     string `json:"source"`
	Reloadable bool   `json:"reloadable"`
}

func runConfigPrint(opts *globalOptions, flags *pflag.FlagSet, serve *serveOptions) error {
	resolved, err := resolveConfig(flags, &serve.config, os.LookupEnv)
	if err != nil {
		return err
	}
	serve.config.resolved = resolved
	if err := checkServeConfig(serve); err != nil {
		return resolved.withSources(err)
	}
	out := configOutput{Schema: "ironbus.cli.config.v1", Profile: resolved.profile.Name,
		ProfileSource: resolved.profileSource.String(), File: serve.config.file}
	for _, knob := range knobsOf(flags) {
		key := settings.Key(knob.Name)
		out.Settings = append(out.Settings, settingLine{Key: key, Flag: "--" + knob.Name,
			Env: settings.EnvName(knob.Name), Value: knob.Value.String(), Source: resolved.sources[knob.Name].String(), Reloadable: server.Reloadable(key)})
	}
	if opts.json {
		return writeJSON(opts.stdout, out)
	}
	fmt.Fprintf(opts.stdout, "%-28s %-20s %s\n", "profile", out.Profile, out.ProfileSource)
	for _, line := range out.Settings {
		value := line.Value
		if value == "" {
			value = `""`
		}
		reload := ""
		if line.Reloadable {
			reload = "  (SIGHUP reloads)"
		}
		fmt.Fprintf(opts.stdout, "%-28s %-20s %s%s\n", line.Key, value, line.Source, reload)
	}
	return nil
}
