package main

import (
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ironbus/ironbus/broker"
	"github.com/ironbus/ironbus/broker/settings"
)

// runningBroker is what a reload may change.
type runningBroker struct {
	broker *broker.Broker
	logger *slog.Logger
	level  *slog.LevelVar
	// security re-reads the TLS certificates and the auth config (nil
	// when neither is configured): SIGHUP does that before it re-reads
	// the config file, whatever the file says.
	security *securityRuntime
}

// reloadFunc applies a knob's new value to the running broker; next holds
// every knob's new value (the one changed among them).
type reloadFunc func(running *runningBroker, next *serveOptions) error

// reloadableKnobs is the safe subset SIGHUP applies, by knob (flag) name.
// Every other changed knob is reported as needing a restart. To make a
// knob reloadable, add its name and a function that applies it here.
func reloadableKnobs() map[string]reloadFunc {
	knobs := map[string]reloadFunc{
		"log-level": func(running *runningBroker, next *serveOptions) error {
			level, err := parseLogLevel(next.config.logLevel)
			if err == nil {
				running.level.Set(level)
			}
			return err
		},
	}
	// The retention bounds, the disk budget and its policy swap as one
	// config (a refused one leaves the running one in force), whichever
	// of them changed.
	for _, name := range []string{"retention-bytes", "retention-age", "retention-records", "retention-policy",
		"group-expiry", "dlq-retention", "dlq-retention-bytes", "disk-budget", "disk-headroom", "disk-full-policy"} {
		knobs[name] = reloadRetention
	}
	return knobs
}

func reloadRetention(running *runningBroker, next *serveOptions) error {
	retention, err := next.retention.brokerRetention(deadLetterRetention(next.dlqRetention))
	if err != nil {
		return err
	}
	return running.broker.SetRetention(retention)
}

// watchReloads reloads the configuration on each SIGHUP until the returned
// stop is called. Without a resolved configuration (`dev`) it does
// nothing, and SIGHUP keeps its default meaning.
func watchReloads(serve *serveOptions, running *runningBroker) (stop func()) {
	if serve.config.resolved == nil || running.level == nil {
		return func() {}
	}
	hangups := make(chan os.Signal, 1)
	done := make(chan struct{})
	finished := make(chan struct{})
	signal.Notify(hangups, syscall.SIGHUP)
	go func() {
		defer close(finished)
		for {
			select {
			case <-hangups:
				reloadConfig(serve, running, os.LookupEnv)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hangups)
		close(done)
		<-finished
	}
}

// reloadConfig re-reads the file and the environment (the command line
// stays as given), applies the changed knobs that are reloadable and
// reports the rest. A configuration that does not parse or validate is not
// applied at all: the broker keeps running on what it has.
func reloadConfig(serve *serveOptions, running *runningBroker, lookupEnv func(string) (string, bool)) {
	if running.security.configured() {
		if err := running.security.Reload(); err != nil {
			running.logger.Error("SIGHUP: TLS and auth files not re-read; the previous ones stay in force", "error", err.Error())
		} else {
			running.logger.Info("SIGHUP: TLS certificates and auth identities re-read")
		}
	}
	current := serve.config.resolved
	nextCmd, next := newServeCommand(&globalOptions{stdout: io.Discard, stderr: io.Discard})
	for name, text := range current.commandLine {
		// A zero size prints as "" and does not parse back; its value is
		// the default either way, and it must still outrank the file.
		_ = nextCmd.Flags().Set(name, text)
		nextCmd.Flags().Lookup(name).Changed = true
	}
	resolved, err := resolveConfig(nextCmd.Flags(), &next.config, lookupEnv)
	if err == nil {
		_, err = next.brokerConfig(&globalOptions{stdout: io.Discard, stderr: io.Discard})
	}
	if err != nil {
		running.logger.Error("config reload refused; the running configuration stays", "error", err.Error())
		return
	}
	reloadable := reloadableKnobs()
	var applied, refused []string
	for _, knob := range knobsOf(resolved.flags) {
		was := current.flags.Lookup(knob.Name).Value.String()
		now := knob.Value.String()
		if was == now {
			continue
		}
		source := resolved.sources[knob.Name]
		apply, ok := reloadable[knob.Name]
		if !ok {
			refused = append(refused, knob.Name)
			running.logger.Warn("config reload: this change needs a restart; keeping the running value",
				"knob", settings.Key(knob.Name), "running", was, "new", now, "source", source.String())
			continue
		}
		if err := apply(running, next); err != nil {
			running.logger.Error("config reload: applying failed; keeping the running value", "knob", settings.Key(knob.Name), "error", err.Error())
			continue
		}
		_ = current.flags.Lookup(knob.Name).Value.Set(now)
		current.sources[knob.Name] = source
		applied = append(applied, knob.Name)
	}
	if resolved.profile.Name != current.profile.Name {
		refused = append(refused, settings.ProfileKnob)
		running.logger.Warn("config reload: this change needs a restart; keeping the running value",
			"knob", settings.ProfileKnob, "running", current.profile.Name, "new", resolved.profile.Name)
	}
	running.logger.Info("config reloaded", "applied", applied, "needs_restart", refused)
}
