package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeConfig writes a TOML file for the test and returns its path.
func writeConfig(t *testing.T, path, text string) string {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "ironbus.toml")
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// precedenceLayers sets up one knob per layer: the file picks the
// edge-tiny profile and overrides two of its values, the environment
// overrides the file and the profile, a flag overrides the environment.
func precedenceLayers(t *testing.T) (file string, flags []string) {
	t.Setenv("IRONBUS_WINDOW", "500")
	t.Setenv("IRONBUS_MAX_FRAME", "2MiB")
	t.Setenv("IRONBUS_SEGMENT_BYTE", "1MiB")
	file = writeConfig(t, "", "profile = \"edge-tiny\"\nmax_connections = 64\nwindow = 300\n")
	return file, []string{"--config", file, "--max-frame", "4MiB", "--ram-ceiling", "128MiB"}
}

func TestConfigPrecedenceFlagEnvFileProfile(t *testing.T) {
	file, flags := precedenceLayers(t)
	result := runCLI(t, append([]string{"config", "print", "--json"}, flags...)...)
	expectCode(t, result, exitClean)
	var out configOutput
	if err := json.Unmarshal([]byte(result.stdout), &out); err != nil {
		t.Fatalf("%v:\n%s", err, result.stdout)
	}
	if out.Schema != "ironbus.cli.config.v1" || out.Profile != "edge-tiny" || out.ProfileSource != "file:"+file {
		t.Fatalf("profile %q from %q (schema %q)", out.Profile, out.ProfileSource, out.Schema)
	}
	want := map[string][2]string{
		"durability":      {"sync", "default"},
		"staging_bytes":   {"256KiB", "profile:edge-tiny"},
		"max_connections": {"64", "file:" + file},
		"window":          {"500", "env:IRONBUS_WINDOW"},
		"max_frame":       {"4MiB", "flag"},
	}
	for _, line := range out.Settings {
		if w, ok := want[line.Key]; ok {
			if line.Value != w[0] || line.Source != w[1] {
				t.Errorf("%s = %s from %s, want %s from %s", line.Key, line.Value, line.Source, w[0], w[1])
			}
			delete(want, line.Key)
		}
		if line.Env != "IRONBUS_"+strings.ToUpper(line.Key) || line.Flag != "--"+strings.ReplaceAll(line.Key, "_", "-") {
			t.Errorf("names of %s: %s, %s", line.Key, line.Flag, line.Env)
		}
	}
	if len(want) > 0 {
		t.Errorf("not printed: %v", want)
	}

	// serve resolves the same way, and says so in one line at startup.
	broker := ironbus.Serve(t, append([]string{"serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0"}, flags...)...)
	line := logLine(broker.Logs(), "msg=config ")
	for _, want := range []string{"profile=edge-tiny", "max_connections=64", "window=500", "max_frame=4MiB", "staging_bytes=256KiB", "durability=sync"} {
		if !strings.Contains(line, " "+want+" ") {
			t.Errorf("the config line lacks %s:\n%s", want, line)
		}
	}
	if warning := logLine(broker.Logs(), "names no setting"); !strings.Contains(warning, "IRONBUS_SEGMENT_BYTE (did you mean IRONBUS_SEGMENT_BYTES?)") {
		t.Errorf("no warning for a misspelt variable:\n%s", broker.Logs())
	}
	expectCode(t, cliResult{code: broker.Stop(os.Interrupt)}, exitClean)

	// --edge is --profile edge-tiny; naming another profile too is a mistake.
	clash := runCLI(t, "config", "print", "--edge", "--profile", "throughput")
	expectCode(t, clash, exitUsage)
	if !strings.Contains(clash.stderr, "--edge is --profile edge-tiny") {
		t.Errorf("--edge with another profile:\n%s", clash.stderr)
	}
}

// logLine returns the first line of logs containing fragment.
func logLine(logs, fragment string) string {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, fragment) {
			return line + " "
		}
	}
	return ""
}

func TestConfigPrintHuman(t *testing.T) {
	t.Setenv("IRONBUS_LOG_LEVEL", "warn")
	t.Setenv("IRONBUS_CONFIG", writeConfig(t, "", "window = 128\n"))
	result := runCLI(t, "config", "print", "--profile", "throughput")
	expectCode(t, result, exitClean)
	for _, want := range []string{"profile                      throughput           flag",
		"segment_bytes                256MiB               profile:throughput",
		"log_level                    warn                 env:IRONBUS_LOG_LEVEL  (SIGHUP reloads)",
		"addr                         127.0.0.1:7777       default",
		"window                       128                  file:"} {
		if !strings.Contains(result.stdout, want) {
			t.Errorf("missing %q in:\n%s", want, result.stdout)
		}
	}
}

func TestConfigUnknownKeyIsFatalWithSuggestion(t *testing.T) {
	file := writeConfig(t, "", "segment_bytes = \"8MiB\"\nmax_conections = 32\n")
	for _, args := range [][]string{
		{"config", "check", file},
		{"serve", "--data-dir", t.TempDir(), "--config", file},
	} {
		result := runCLI(t, args...)
		expectCode(t, result, exitUsage)
		if !strings.Contains(result.stderr, "max_conections: settings: unknown key; did you mean max_connections?") {
			t.Errorf("%v:\n%s", args, result.stderr)
		}
	}
}

func TestConfigBadValuesNameKeyValueAndExample(t *testing.T) {
	file := writeConfig(t, "", "segment_bytes = \"8 megs\"\n")
	result := runCLI(t, "config", "check", file)
	expectCode(t, result, exitUsage)
	if !strings.Contains(result.stderr, `segment_bytes = "8 megs"`) || !strings.Contains(result.stderr, "for example 64MiB") {
		t.Errorf("a bad size in a file:\n%s", result.stderr)
	}
	t.Setenv("IRONBUS_VISIBILITY_TIMEOUT", "30")
	result = runCLI(t, "config", "print")
	expectCode(t, result, exitUsage)
	if !strings.Contains(result.stderr, `env:IRONBUS_VISIBILITY_TIMEOUT: IRONBUS_VISIBILITY_TIMEOUT = "30"`) ||
		!strings.Contains(result.stderr, "for example 30s") {
		t.Errorf("a duration without a unit in the environment:\n%s", result.stderr)
	}
}

func TestConfigCheckExitCodes(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		text string
		code int
		says string
	}{
		{"profile = \"edge-tiny\"\nsegment_bytes = \"16MiB\"\nlog_level = \"debug\"\n", exitClean, "valid (3 keys, profile edge-tiny)"},
		{"profile = \"edge-tny\"\n", exitUsage, `did you mean "edge-tiny"`},
		{"durability = \"none\"\n", exitUsage, "add --accept-relaxed-durability to accept that (--durability none came from file:"},
		{"storage = \"memory\"\naccept_memory_storage_loss = true\n", exitUsage, "needs --memory-storage-cap"},
		{"visibility_timeout = \"10m\"\n", exitUsage, "--visibility-timeout 10m (visibility_timeout): out of bounds, want 100ms to 5m"},
		{"segment_bytes = 12\n", exitUsage, "--segment-bytes 12 B (segment_bytes): out of bounds, want 64 KiB to 1 GiB (--segment-bytes 12B came from file:"},
		{"checkpoint_interval = \"0s\"\n", exitUsage, "want 10ms to 1m"},
		{"profile = \"edge-tiny\"\nmax_connections = 4096\n", exitUsage, "--max-connections"},
		{"segment_bytes = \n", exitUsage, "not valid TOML"},
	}
	for i, c := range cases {
		file := writeConfig(t, filepath.Join(dir, "case"+string(rune('a'+i))+".toml"), c.text)
		result := runCLI(t, "config", "check", file)
		expectCode(t, result, c.code)
		if !strings.Contains(result.stdout+result.stderr, c.says) {
			t.Errorf("%q: does not say %q:\n%s%s", c.text, c.says, result.stdout, result.stderr)
		}
	}
	expectCode(t, runCLI(t, "config", "check", filepath.Join(dir, "missing.toml")), exitNotFound)
	result := runCLI(t, "config", "check", filepath.Join(dir, "casea.toml"), "--json")
	expectCode(t, result, exitClean)
	var out configCheckOutput
	if err := json.Unmarshal([]byte(result.stdout), &out); err != nil || out.Schema != "ironbus.cli.config-check.v1" || !out.Valid || out.Keys != 3 {
		t.Errorf("%+v %v", out, err)
	}
}

// TestSIGHUPReloadsTheSafeSubset runs a real broker on a file, changes the
// file and sends SIGHUP: the log level changes, a restart-only change is
// refused by name, a broken file is refused as a whole.
func TestSIGHUPReloadsTheSafeSubset(t *testing.T) {
	file := writeConfig(t, "", "log_level = \"info\"\nsegment_bytes = \"8MiB\"\n")
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--config", file)
	hangup := func(text, until string) {
		t.Helper()
		writeConfig(t, file, text)
		before := strings.Count(broker.Logs(), until)
		if err := broker.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); strings.Count(broker.Logs(), until) == before; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q after SIGHUP:\n%s", until, broker.Logs())
			}
		}
	}
	hangup("log_level = \"debug\"\nsegment_bytes = \"16MiB\"\n", "config reloaded")
	logs := broker.Logs()
	if !strings.Contains(logs, "applied=[log-level] needs_restart=[segment-bytes]") ||
		!strings.Contains(logLine(logs, "needs a restart"), "knob=segment_bytes running=8MiB new=16MiB source=file:"+file) {
		t.Fatalf("the reload did not apply the level and refuse the segment size:\n%s", logs)
	}
	hangup("log_level = \"debug\"\nlog_levle = \"info\"\n", "config reload refused")
	if !strings.Contains(logLine(broker.Logs(), "config reload refused"), "did you mean log_level?") {
		t.Fatalf("a broken file:\n%s", broker.Logs())
	}
	// At level error, the info lines of a clean stop no longer appear: the
	// level really changed.
	writeConfig(t, file, "log_level = \"error\"\n")
	if err := broker.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Nothing at level error marks that reload's end; it takes
	// milliseconds, so give it a second before the file changes again.
	// Reloads run one after another: once the refusal below (an error
	// line) is logged, the level change before it is in place.
	time.Sleep(time.Second)
	hangup("log_level = \"error\"\nlog_levle = \"info\"\n", "config reload refused")
	expectCode(t, cliResult{code: broker.Stop(os.Interrupt)}, exitClean)
	if strings.Contains(broker.Logs(), "stopped cleanly") {
		t.Fatalf("info lines after the level became error:\n%s", broker.Logs())
	}
}

// TestEdgeTinyTightensPreAuthLimits: the edge-tiny profile scales the
// limits before authentication to its 32 connections, and config print
// says the values came from the profile; balanced keeps the defaults.
func TestEdgeTinyTightensPreAuthLimits(t *testing.T) {
	want := map[string]map[string][2]string{
		"edge-tiny": {
			"max_half_open":            {"16", "profile:edge-tiny"},
			"max_half_open_per_source": {"8", "profile:edge-tiny"},
			"connection_rate":          {"5", "profile:edge-tiny"},
			"auth_lockout_after":       {"3", "profile:edge-tiny"},
		},
		"balanced": {
			"max_half_open":            {"64", "default"},
			"max_half_open_per_source": {"32", "default"},
			"connection_rate":          {"20", "default"},
			"auth_lockout_after":       {"5", "default"},
		},
	}
	for profile, knobs := range want {
		result := runCLI(t, "config", "print", "--profile", profile, "--json")
		expectCode(t, result, exitClean)
		var out configOutput
		if err := json.Unmarshal([]byte(result.stdout), &out); err != nil {
			t.Fatalf("%v:\n%s", err, result.stdout)
		}
		for _, line := range out.Settings {
			if w, ok := knobs[line.Key]; ok {
				if line.Value != w[0] || line.Source != w[1] {
					t.Errorf("%s: %s = %s from %s, want %s from %s", profile, line.Key, line.Value, line.Source, w[0], w[1])
				}
			}
		}
		human := runCLI(t, "config", "print", "--profile", profile)
		if profile == "edge-tiny" && !strings.Contains(human.stdout, "profile:edge-tiny") {
			t.Errorf("config print does not name the profile as the source:\n%s", human.stdout)
		}
	}
}
