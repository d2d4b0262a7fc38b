package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/internal/testbroker"
	"github.com/ironbus/ironbus/server"
)

// startReloadable resolves serve's configuration from args, a file and
// env in process, as serve does at startup, starts a server on it (on a
// temporary data directory and a free loopback port) and returns what a
// reload acts on plus the log it writes.
func startReloadable(t *testing.T, args []string, env map[string]string) (*serveOptions, *server.Server, *testbroker.Log) {
	t.Helper()
	cmd, serve := newServeCommand(&globalOptions{stdout: io.Discard, stderr: io.Discard})
	args = append([]string{"--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--health-addr", "off"}, args...)
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	resolved, err := resolveConfig(cmd.Flags(), &serve.config, lookupIn(env))
	if err != nil {
		t.Fatal(err)
	}
	serve.config.resolved = resolved
	log := &testbroker.Log{}
	cfg := serve.serverConfig(&globalOptions{stdout: io.Discard, stderr: log})
	return serve, testbroker.Start(t, cfg).Server(), log
}

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		value, ok := env[name]
		return value, ok
	}
}

// TestReloadKeepsCommandLineAndEnvironmentPrecedence: a reload re-merges
// the layers with the same precedence as startup: the file cannot
// override a flag or a variable.
func TestReloadKeepsCommandLineAndEnvironmentPrecedence(t *testing.T) {
	file := writeConfig(t, "", "log_level = \"info\"\n")
	serve, running, _ := startReloadable(t, []string{"--config", file, "--log-level", "warn"}, nil)
	writeConfig(t, file, "log_level = \"debug\"\n")
	reloadConfig(serve, running, lookupIn(nil))
	if level := running.Config().LogLevel; level != "warn" {
		t.Fatalf("the file overrode --log-level on reload: level %v", level)
	}

	serve, running, log := startReloadable(t, []string{"--config", file}, map[string]string{"IRONBUS_LOG_LEVEL": "error"})
	writeConfig(t, file, "log_level = \"info\"\n")
	reloadConfig(serve, running, lookupIn(map[string]string{"IRONBUS_LOG_LEVEL": "error"}))
	if level := running.Config().LogLevel; level != "error" {
		t.Fatalf("the file overrode IRONBUS_LOG_LEVEL on reload: level %v", level)
	}
	reloadConfig(serve, running, lookupIn(nil))
	if level := running.Config().LogLevel; level != "info" || serve.config.resolved.sources["log-level"].String() != "file:"+file {
		t.Fatalf("without the variable the file's level should apply: %v from %v\n%s",
			level, serve.config.resolved.sources["log-level"], log)
	}
}

// TestReloadRefusesAProfileChangeAndABadFile: a new profile changes
// restart-only knobs, each reported; a file that fails the coupled checks
// changes nothing.
func TestReloadRefusesAProfileChangeAndABadFile(t *testing.T) {
	file := writeConfig(t, "", "log_level = \"info\"\n")
	serve, running, log := startReloadable(t, []string{"--config", file}, nil)
	writeConfig(t, file, "profile = \"edge-tiny\"\nlog_level = \"debug\"\n")
	reloadConfig(serve, running, lookupIn(nil))
	for _, want := range []string{"knob=max_connections running=256 new=32", "knob=profile running=balanced new=edge-tiny", "applied=[log-level]"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the reload log lacks %q:\n%s", want, log)
		}
	}
	if serve.cfg.MaxConnections != 256 || running.Config().MaxConnections != 256 {
		t.Fatalf("a restart-only knob changed while running: %d", serve.cfg.MaxConnections)
	}
	log.Reset()
	writeConfig(t, file, "log_level = \"error\"\ndurability = \"none\"\n")
	reloadConfig(serve, running, lookupIn(nil))
	if running.Config().LogLevel != "debug" || !strings.Contains(log.String(), "config reload refused") ||
		!strings.Contains(log.String(), "accept-relaxed-durability") {
		t.Fatalf("a file failing a coupled check was applied (level %v):\n%s", running.Config().LogLevel, log)
	}
}

// TestReloadSwapsRetention: the retention bounds and the disk budget are
// reloadable; a change reaches the running broker as one config, and one
// the broker refuses leaves the running config in force.
func TestReloadSwapsRetention(t *testing.T) {
	file := writeConfig(t, "", "retention_bytes = \"1GiB\"\n")
	serve, running, log := startReloadable(t, []string{"--config", file}, nil)
	writeConfig(t, file, "retention_bytes = \"2GiB\"\nretention_age = \"72h\"\ndisk_full_policy = \"drop-oldest\"\n")
	reloadConfig(serve, running, lookupIn(nil))
	got := running.Config()
	if got.RetentionBytes != 2<<30 || got.RetentionAge != 72*time.Hour || got.DiskFullPolicy != "drop-oldest" {
		t.Fatalf("the reload did not reach the broker: %+v\n%s", got, log)
	}
	if !strings.Contains(log.String(), "retention-bytes") {
		t.Errorf("the reload summary does not name the retention change:\n%s", log)
	}
	writeConfig(t, file, "retention_bytes = \"2GiB\"\nretention_policy = \"keep-everything\"\n")
	reloadConfig(serve, running, lookupIn(nil))
	if running.Config().RetentionAge != 72*time.Hour {
		t.Fatalf("a refused retention config replaced the running one: %+v", running.Config())
	}
}
