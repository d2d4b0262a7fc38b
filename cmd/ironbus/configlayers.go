package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ironbus/ironbus/broker/settings"
)

// configOptions are the flags that choose where settings come from, and
// what the choice resolved to.
type configOptions struct {
	file    string
	profile string
	// resolved is set once the layers are applied (nil for `dev`, which
	// takes no configuration).
	resolved *resolvedConfig
}

// resolvedConfig is the merged configuration: the flag set holds every
// knob's value, sources says which layer set it.
type resolvedConfig struct {
	flags         *pflag.FlagSet
	profile       settings.Profile
	profileSource settings.Source
	file          *settings.File
	sources       map[string]settings.Source
	// commandLine is every flag given on the command line with its text:
	// a reload re-applies them, since they outrank the file and the
	// environment it re-reads.
	commandLine map[string]string
}

func addConfigFlags(cmd *cobra.Command, config *configOptions, logLevel *string) {
	flags := cmd.Flags()
	flags.StringVar(&config.file, "config", "", "TOML file of settings (keys are flag names with _; see docs/CONFIG.md; also IRONBUS_CONFIG); unknown keys are refused")
	flags.StringVar(&config.profile, settings.ProfileKnob, settings.DefaultProfile,
		"named set of values for every knob not set otherwise: "+strings.Join(settings.ProfileNames(), ", "))
	flags.Var(choiceValue{logLevel, []string{"debug", "info", "warn", "error"}}, "log-level",
		"debug, info, warn or error; SIGHUP reloads it from the file and environment")
}

// cliOnlyFlag names the serve flags that are actions of one run rather
// than settings, so they are neither file keys nor environment variables.
// --edge is the deprecated spelling of --profile edge-tiny; --verbose is
// the root's switch for offline commands.
func cliOnlyFlag(name string) bool {
	switch name {
	case "help", "config", "print-budget", "profile-out", "json", "edge", "verbose":
		return true
	}
	return false
}

// knobsOf lists every settable knob of a serve flag set, the profile
// excepted (it is chosen before the others).
func knobsOf(flags *pflag.FlagSet) []settings.Knob {
	var knobs []settings.Knob
	flags.VisitAll(func(flag *pflag.Flag) {
		if !cliOnlyFlag(flag.Name) && flag.Name != settings.ProfileKnob {
			knobs = append(knobs, settings.Knob{Name: flag.Name, Value: flag.Value, Default: flag.DefValue})
		}
	})
	return knobs
}

// knobNames is every name a file may set: the knobs and the profile.
func knobNames(flags *pflag.FlagSet) []string {
	names := []string{settings.ProfileKnob}
	for _, knob := range knobsOf(flags) {
		names = append(names, knob.Name)
	}
	return names
}

// resolveConfig applies profile, file and environment to every knob of
// flags not given on the command line, in that order of precedence
// (flag > env > file > profile > default).
func resolveConfig(flags *pflag.FlagSet, config *configOptions, lookupEnv func(string) (string, bool)) (*resolvedConfig, error) {
	if flags.Changed("edge") {
		if flags.Changed(settings.ProfileKnob) && config.profile != "edge-tiny" {
			return nil, exitErrorf(exitUsage, "--edge is --profile edge-tiny; drop one of --edge and --profile %s", config.profile)
		}
		_ = flags.Set(settings.ProfileKnob, "edge-tiny")
	}
	resolved := &resolvedConfig{flags: flags, commandLine: map[string]string{}}
	flags.Visit(func(flag *pflag.Flag) { resolved.commandLine[flag.Name] = flag.Value.String() })
	if !flags.Changed("config") && lookupEnv != nil {
		// Containers and unit files name the file in the environment.
		if path, ok := lookupEnv(settings.EnvName("config")); ok {
			config.file = path
		}
	}
	if config.file != "" {
		file, err := readConfigFile(config.file, knobNames(flags))
		if err != nil {
			return nil, err
		}
		resolved.file = file
	}
	profile, source, err := settings.SelectProfile(config.profile, flags.Changed(settings.ProfileKnob), lookupEnv, resolved.file)
	if err != nil {
		return nil, exitErrorf(exitUsage, "%w", err)
	}
	config.profile, resolved.profile, resolved.profileSource = profile.Name, profile, source
	resolved.sources, err = settings.Apply(knobsOf(flags), settings.Layers{Profile: profile, File: resolved.file,
		LookupEnv: lookupEnv, OnCommandLine: flags.Changed})
	if err != nil {
		return nil, exitErrorf(exitUsage, "%w", err)
	}
	return resolved, nil
}

// withSources adds to a refusal where each flag it names got its value,
// when that was not the command line: "--durability none" is confusing
// to someone who wrote durability = "none" in a file.
func (resolved *resolvedConfig) withSources(err error) error {
	var exit *exitError
	if resolved == nil || !errors.As(err, &exit) || exit.code != exitUsage {
		return err
	}
	var notes []string
	for _, knob := range knobsOf(resolved.flags) {
		source := resolved.sources[knob.Name]
		if source.Kind != settings.SourceFlag && source.Kind != settings.SourceDefault &&
			strings.Contains(err.Error(), "--"+knob.Name) {
			notes = append(notes, fmt.Sprintf("--%s %s came from %s", knob.Name, knob.Value.String(), source))
		}
	}
	if len(notes) == 0 {
		return err
	}
	return exitErrorf(exitUsage, "%w (%s)", err, strings.Join(notes, "; "))
}

// readConfigFile reads and decodes a --config file. A missing file is
// "not found"; anything wrong inside it is a usage error naming the key.
func readConfigFile(path string, names []string) (*settings.File, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, exitErrorf(exitNotFound, "--config %s: the file does not exist", path)
	}
	if err != nil {
		return nil, exitErrorf(exitUsage, "--config %s: %w", path, err)
	}
	file, err := settings.ParseFile(path, data, names)
	if err != nil {
		return nil, exitErrorf(exitUsage, "%w", err)
	}
	return file, nil
}

// attrs is the materialized configuration as slog attributes, one per
// knob by its file key, so a single log line shows what the broker runs.
func (resolved *resolvedConfig) attrs() []any {
	attrs := []any{"profile", resolved.profile.Name}
	for _, knob := range knobsOf(resolved.flags) {
		attrs = append(attrs, settings.Key(knob.Name), knob.Value.String())
	}
	return attrs
}

// otherVariables are the IRONBUS_* variables that are not serve settings
// but mean something to this binary or its test suites, so they draw no
// "names no setting" warning.
var otherVariables = []string{
	"config",         // the --config file
	"config-dir",     // where `ironbus context` keeps contexts
	"uring-disable",  // turns io_uring off in the backend probe
	"seed",           // replays a seeded test
	"crash-cycles",   // the kill -9 harness's cycle count
	"powercut-seeds", // the power-cut sweeps' seed count
	"update-docs",    // `make docs`
}

// logConfig writes the materialized configuration in one line, then the
// IRONBUS_* variables that name no setting: an operator must not miss a
// misspelt one.
func logConfig(logger *slog.Logger, serve *serveOptions) {
	if resolved := serve.config.resolved; resolved != nil {
		logger.Info("config", resolved.attrs()...)
		for _, variable := range settings.UnknownEnv(os.Environ(), append(knobNames(resolved.flags), otherVariables...)) {
			logger.Warn("ignoring an environment variable that names no setting", "variable", variable)
		}
	}
}

// choiceValue is a pflag.Value taking one of a few words, so a bad value
// is refused where it is given (flag, variable or file key) and the
// message says which.
type choiceValue struct {
	target  *string
	choices []string
}

func (v choiceValue) String() string {
	if v.target == nil {
		return ""
	}
	return *v.target
}

func (v choiceValue) Set(text string) error {
	for _, choice := range v.choices {
		if strings.EqualFold(text, choice) {
			*v.target = choice
			return nil
		}
	}
	return fmt.Errorf("%q: want %s", text, strings.Join(v.choices, ", "))
}

func (choiceValue) Type() string { return "choice" }
