package main

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ironbus/ironbus/broker/settings"
	"github.com/ironbus/ironbus/server"
)

// watchReloads reloads the configuration on each SIGHUP until the returned
// stop is called. Without a resolved configuration (`dev`) it does
// nothing, and SIGHUP keeps its default meaning.
func watchReloads(serve *serveOptions, srv *server.Server) (stop func()) {
	if serve.config.resolved == nil {
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
				reloadConfig(serve, srv, os.LookupEnv)
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

// reloadConfig re-reads the TLS and auth files, then the config file and
// the environment (the command line stays as given), applies the changed
// settings that are reloadable and reports the rest. A configuration that
// does not parse or validate is not applied at all: the broker keeps
// running on what it has.
func reloadConfig(serve *serveOptions, srv *server.Server, lookupEnv func(string) (string, bool)) {
	logger := srv.Logger()
	if serve.cfg.TLSCert != "" || serve.cfg.TLSKey != "" || serve.cfg.AuthConfig != "" {
		if err := srv.ReloadSecrets(); err != nil {
			logger.Error("SIGHUP: TLS and auth files not re-read; the previous ones stay in force", "error", err.Error())
		} else {
			logger.Info("SIGHUP: TLS certificates and auth identities re-read")
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
		err = next.cfg.Validate()
	}
	if err != nil {
		logger.Error("config reload refused; the running configuration stays", "error", err.Error())
		return
	}
	var changed, applied, refused []string
	for _, knob := range knobsOf(resolved.flags) {
		was, now := current.flags.Lookup(knob.Name).Value.String(), knob.Value.String()
		if was == now {
			continue
		}
		if !server.Reloadable(settings.Key(knob.Name)) {
			refused = append(refused, knob.Name)
			logger.Warn("config reload: this change needs a restart; keeping the running value",
				"knob", settings.Key(knob.Name), "running", was, "new", now, "source", resolved.sources[knob.Name].String())
			continue
		}
		changed = append(changed, knob.Name)
	}
	if len(changed) > 0 {
		if err := srv.Reload(next.cfg); err != nil {
			logger.Error("config reload: applying failed; keeping the running values", "knobs", changed, "error", err.Error())
			changed = nil
		}
	}
	for _, name := range changed {
		_ = current.flags.Lookup(name).Value.Set(resolved.flags.Lookup(name).Value.String())
		current.sources[name] = resolved.sources[name]
		applied = append(applied, name)
	}
	if resolved.profile.Name != current.profile.Name {
		refused = append(refused, settings.ProfileKnob)
		logger.Warn("config reload: this change needs a restart; keeping the running value",
			"knob", settings.ProfileKnob, "running", current.profile.Name, "new", resolved.profile.Name)
	}
	logger.Info("config reloaded", "applied", applied, "needs_restart", refused)
}
