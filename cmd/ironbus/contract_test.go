package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/internal/testbroker"
	"github.com/spf13/cobra"
)

// withoutJSON are the commands that print no report a script could parse,
// with the reason: their output is the product itself.
var withoutJSON = map[string]string{
	"ironbus help":       "cobra's help text",
	"ironbus completion": "a shell script for the shell to source",
}

// TestEveryCommandTakesJSON: the CLI contract promises --json on every
// command (docs/CLI.md, "Rules every command follows"), so a command added
// without it fails here rather than in a user's script.
func TestEveryCommandTakesJSON(t *testing.T) {
	root := newRootCmd(&globalOptions{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for prefix := range withoutJSON {
			if cmd.CommandPath() == prefix || strings.HasPrefix(cmd.CommandPath(), prefix+" ") {
				return
			}
		}
		if cmd.Runnable() && !cmd.Hidden && cmd.Flags().Lookup("json") == nil && cmd.InheritedFlags().Lookup("json") == nil {
			t.Errorf("%s has no --json flag", cmd.CommandPath())
		}
		for _, child := range cmd.Commands() {
			walk(child)
		}
	}
	walk(root)
}

// envelopeRun is what one command printed with --json, kept so the
// contract can name every command it saw and fail on the ones it did not.
type envelopeRun struct {
	t       *testing.T
	covered map[string]bool
}

// expect runs the binary with --json (stdin and extra environment
// optional), requires exit code want and at least one line of stdout, and
// checks every line is a JSON object whose schema is ours. path is the
// command path as cobra names it, for the coverage check.
func (run *envelopeRun) expect(path string, want int, stdin string, env []string, args ...string) cliResult {
	run.t.Helper()
	var stdout, stderr bytes.Buffer
	command := ironbus.Command(append(args, "--json")...)
	command.Stdin = strings.NewReader(stdin)
	command.Stdout, command.Stderr = &stdout, &stderr
	command.Env = append(os.Environ(), env...)
	err := command.Run()
	result := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		result.code = exit.ExitCode()
	case err != nil:
		run.t.Fatalf("running ironbus %q: %v", args, err)
	}
	expectCode(run.t, result, want)
	checkEnvelopeLines(run.t, path, result.stdout)
	run.covered[path] = true
	return result
}

// checkEnvelopeLines: every non-empty line is one JSON object carrying an
// "ironbus." schema, and there is at least one.
func checkEnvelopeLines(t *testing.T, path, stdout string) {
	t.Helper()
	lines := 0
	for line := range strings.SplitSeq(stdout, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		lines++
		var object map[string]any
		if err := json.Unmarshal([]byte(line), &object); err != nil {
			t.Fatalf("%s --json printed a line that is not a JSON object: %v\n%s", path, err, line)
		}
		schema, _ := object["schema"].(string)
		if !strings.HasPrefix(schema, "ironbus.") {
			t.Fatalf("%s --json printed a line without an ironbus.* schema:\n%s", path, line)
		}
	}
	if lines == 0 {
		t.Fatalf("%s --json printed nothing on stdout", path)
	}
}

// TestEveryCommandPrintsTheEnvelope: with --json, every line every command
// prints on stdout is a JSON object with a versioned "schema" (docs/CLI.md,
// "Rules every command follows"). Each command runs in a realistic setup:
// the live ones against a real broker, the offline ones on copies of the
// checked-in data directories. A command added without a case here fails.
func TestEveryCommandPrintsTheEnvelope(t *testing.T) {
	if ironbus.Emulator() != "" {
		t.Skip("bench, dev and upgrade re-execute the binary, which needs binfmt_misc under emulation")
	}
	run := &envelopeRun{t: t, covered: map[string]bool{}}
	liveDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", liveDir, "--addr", "127.0.0.1:0")
	envelopeLive(run, broker)
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("the broker exited %d on SIGTERM", code)
	}
	envelopeOffline(run, liveDir)
	envelopeSecurity(run)
	envelopeDevAndInstall(run)

	root := newRootCmd(&globalOptions{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		if _, exempt := withoutJSON[cmd.CommandPath()]; exempt {
			return
		}
		if cmd.Runnable() && !cmd.Hidden && !run.covered[cmd.CommandPath()] {
			t.Errorf("%s has no case in TestEveryCommandPrintsTheEnvelope", cmd.CommandPath())
		}
		for _, child := range cmd.Commands() {
			walk(child)
		}
	}
	walk(root)
}

// envelopeLive runs the commands that talk to a running broker.
func envelopeLive(run *envelopeRun, broker *testbroker.Process) {
	addr := []string{"--addr", broker.Addr()}
	run.expect("ironbus pub", exitClean, "one\ntwo\nthree\n", nil, append([]string{"pub", "--stream", "orders"}, addr...)...)
	orders := append([]string{"--stream", "orders", "--wait", "1s"}, addr...)
	run.expect("ironbus sub", exitClean, "", nil, append([]string{"sub", "--group", "billing", "--max", "3", "--ack"}, orders...)...)
	run.expect("ironbus sub", exitClean, "", nil, append([]string{"sub", "--group", "spare", "--max", "1"}, orders...)...)
	group := append([]string{"--stream", "orders"}, addr...)
	run.expect("ironbus group ls", exitClean, "", nil, append([]string{"group", "ls"}, addr...)...)
	run.expect("ironbus group info", exitClean, "", nil, append([]string{"group", "info", "--group", "billing"}, group...)...)
	run.expect("ironbus group reset", exitClean, "", nil, append([]string{"group", "reset", "--group", "billing", "--to", "earliest"}, group...)...)
	run.expect("ironbus group rm", exitClean, "", nil, append([]string{"group", "rm", "--group", "spare"}, group...)...)

	events := append([]string{"--stream", "events", "--group", "fan"}, addr...)
	publishNumbered(run.t, broker.Addr(), "events", 3)
	run.expect("ironbus sub", exitClean, "", nil, append([]string{"sub", "--broadcast", "--max", "1", "--wait", "1s"}, events...)...)
	run.expect("ironbus cumulative-ack", exitClean, "", nil, append([]string{"cumulative-ack", "--up-to", "1"}, events...)...)

	// One poison record, refused until max-deliver moves it to the DLQ.
	publishNumbered(run.t, broker.Addr(), "poison", 1)
	poison := append([]string{"sub", "--stream", "poison", "--group", "g", "--wait", "1s"}, addr...)
	for range 5 {
		run.expect("ironbus sub", exitClean, "", nil, append(poison, "--max", "1", "--nack", "--nack-delay", "1ms")...)
	}
	runCLI(run.t, append(poison, "--max", "1")...)
	run.expect("ironbus dlq ls", exitClean, "", nil, append([]string{"dlq", "ls"}, addr...)...)

	envelopeStreams(run, addr)
	// A single node answers that it is no cluster member, as an error
	// envelope.
	run.expect("ironbus cluster status", exitRefused, "", nil, append([]string{"cluster", "status"}, addr...)...)
	run.expect("ironbus cluster transfer", exitRefused, "", nil, append([]string{"cluster", "transfer", "--stream", "orders", "--to", "2"}, addr...)...)

	health := []string{"--health-addr", broker.HealthAddr()}
	for _, report := range []string{"groups", "streams", "storage", "recovery", "connections"} {
		run.expect("ironbus report "+report, exitClean, "", nil, append([]string{"report", report}, health...)...)
	}
	run.expect("ironbus server info", exitClean, "", nil, append([]string{"server", "info"}, health...)...)
	run.expect("ironbus server check", exitClean, "", nil, append([]string{"server", "check"}, health...)...)
	run.expect("ironbus top", exitClean, "", nil, append([]string{"top", "--once", "--interval", "0"}, health...)...)
}

// envelopeStreams runs the stream verbs against the live broker.
func envelopeStreams(run *envelopeRun, addr []string) {
	run.expect("ironbus stream create", exitClean, "", nil, append([]string{"stream", "create", "shipments", "--partitions", "4", "--max-age", "7d"}, addr...)...)
	run.expect("ironbus stream bind", exitClean, "", nil, append([]string{"stream", "bind", "shipments.>", "shipments"}, addr...)...)
	run.expect("ironbus stream ls", exitClean, "", nil, append([]string{"stream", "ls"}, addr...)...)
	run.expect("ironbus stream info", exitClean, "", nil, append([]string{"stream", "info", "shipments"}, addr...)...)
	run.expect("ironbus stream unbind", exitClean, "", nil, append([]string{"stream", "unbind", "shipments.>"}, addr...)...)
	run.expect("ironbus stream purge", exitClean, "", nil, append([]string{"stream", "purge", "shipments", "--force"}, addr...)...)
	run.expect("ironbus stream rm", exitClean, "", nil, append([]string{"stream", "rm", "shipments", "--force"}, addr...)...)
	run.expect("ironbus stream create", exitClean, "", nil, append([]string{"stream", "create", "latest", "--compact"}, addr...)...)
	run.expect("ironbus pub", exitClean, "", nil, append([]string{"pub", "--stream", "latest", "--key", "k", "--tombstone"}, addr...)...)
	run.expect("ironbus stream compact", exitClean, "", nil, append([]string{"stream", "compact", "latest"}, addr...)...)
}

// envelopeOffline runs the commands that read a stopped data directory,
// and those that need no broker at all.
func envelopeOffline(run *envelopeRun, liveDir string) {
	at := []string{"--data-dir", liveDir}
	run.expect("ironbus dlq peek", exitClean, "", nil, append([]string{"dlq", "peek", "--stream", "poison"}, at...)...)
	run.expect("ironbus dlq redrive", exitClean, "", nil, append([]string{"dlq", "redrive", "--stream", "poison"}, at...)...)
	run.expect("ironbus txn list", exitClean, "", nil, append([]string{"txn", "list"}, at...)...)
	run.expect("ironbus txn show", exitNotFound, "", nil, append([]string{"txn", "show", "1"}, at...)...)

	demo := copyTestdata(run.t, "demo")
	run.expect("ironbus peek", exitClean, "", nil, "peek", "--data-dir", demo)
	run.expect("ironbus dump", exitClean, "", nil, "dump", "--data-dir", demo)
	// Reading from below the first offset also prints a gap line.
	damaged := run.expect("ironbus dump", exitClean, "", nil, "dump", "--data-dir", copyTestdata(run.t, "damaged"), "--limit", "0")
	if !strings.Contains(damaged.stdout, `"schema":"`+gapSchema+`"`) {
		run.t.Errorf("dump of the damaged log printed no %s line", gapSchema)
	}
	run.expect("ironbus verify", exitClean, "", nil, "verify", "--data-dir", demo)
	run.expect("ironbus scrub", exitClean, "", nil, "scrub", "--data-dir", demo)
	backup := filepath.Join(run.t.TempDir(), "backup")
	run.expect("ironbus backup", exitClean, "", nil, "backup", "--data-dir", demo, "--out", backup)
	run.expect("ironbus restore", exitClean, "", nil, "restore", "--from", backup, "--data-dir", filepath.Join(run.t.TempDir(), "restored"))
	run.expect("ironbus repair", exitClean, "", nil, "repair", "--data-dir", copyTestdata(run.t, "damaged"), "--apply")

	run.expect("ironbus version", exitClean, "", nil, "version")
	run.expect("ironbus cheat", exitClean, "", nil, "cheat")
	run.expect("ironbus config print", exitClean, "", nil, "config", "print", "--profile", "edge-tiny")
	config := filepath.Join(run.t.TempDir(), "ironbus.toml")
	if err := os.WriteFile(config, []byte("profile = \"edge-tiny\"\n"), 0o600); err != nil {
		run.t.Fatal(err)
	}
	run.expect("ironbus config check", exitClean, "", nil, "config", "check", config)
	run.expect("ironbus serve", exitClean, "", nil, "serve", "--data-dir", run.t.TempDir(), "--print-budget")
	run.expect("ironbus bench", exitClean, "", nil, "bench", "--count", "200")
}

// envelopeSecurity runs the credential commands and contexts, in their
// own config directory so no other test sees the current context.
func envelopeSecurity(run *envelopeRun) {
	dir := run.t.TempDir()
	run.expect("ironbus token create", exitClean, "", nil, "token", "create")
	tokenFile := filepath.Join(dir, "writer.token")
	run.expect("ironbus token create", exitClean, "", nil, "token", "create", "--out", tokenFile)
	ring := filepath.Join(dir, "data.keys")
	run.expect("ironbus key create", exitClean, "", nil, "key", "create", "--out", ring)
	run.expect("ironbus key rotate", exitClean, "", nil, "key", "rotate", ring)
	run.expect("ironbus passwd", exitClean, "secret\n", nil, "passwd", "--memory", "19MiB", "--iterations", "2")
	auth := []string{"--auth-config", filepath.Join(dir, "auth.toml")}
	run.expect("ironbus auth add", exitClean, "", nil, append([]string{"auth", "add", "--name", "writer", "--token-file", tokenFile, "--scopes", "publish"}, auth...)...)
	run.expect("ironbus auth ls", exitClean, "", nil, append([]string{"auth", "ls"}, auth...)...)
	run.expect("ironbus auth export", exitClean, "", nil, append([]string{"auth", "export", "--account", "acme", "--stream", "orders", "--to", "beta"}, auth...)...)
	run.expect("ironbus auth rm", exitClean, "", nil, append([]string{"auth", "rm", "--name", "writer"}, auth...)...)

	env := []string{"IRONBUS_CONFIG_DIR=" + filepath.Join(dir, "config")}
	run.expect("ironbus context create", exitClean, "", env, "context", "create", "lab", "--addr", "127.0.0.1:7777", "--token-file", tokenFile)
	run.expect("ironbus context use", exitClean, "", env, "context", "use", "lab")
	run.expect("ironbus context ls", exitClean, "", env, "context", "ls")
}

// envelopeDevAndInstall covers dev (a long-running process: its one
// stdout object is read, then it is stopped) and upgrade and rollback.
func envelopeDevAndInstall(run *envelopeRun) {
	var stdout lockedBuffer
	dev := ironbus.Command("dev", "--addr", "127.0.0.1:0", "--json")
	dev.Stdout = &stdout
	if err := dev.Start(); err != nil {
		run.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), "\n") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	_ = dev.Process.Signal(syscall.SIGTERM)
	_ = dev.Wait()
	checkEnvelopeLines(run.t, "ironbus dev", stdout.String())
	run.covered["ironbus dev"] = true

	dest := installFixture(run.t)
	run.expect("ironbus upgrade", exitClean, "", nil, "upgrade", "--new-binary", ironbus.Path(), "--dest", dest)
	run.expect("ironbus rollback", exitClean, "", nil, "rollback", "--dest", dest)
}

// lockedBuffer is a bytes.Buffer a child process writes while the test
// reads it.
type lockedBuffer struct {
	mu     sync.Mutex
	buffer bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buffer.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buffer.String()
}
