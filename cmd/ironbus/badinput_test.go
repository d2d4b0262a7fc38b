package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestBadInputNeverReachesExit70 runs every command of the tree (walked,
// so a new command is covered without touching this test) with one bad
// flag value at a time: an unknown flag, malformed, negative, zero and huge
// numbers, durations and sizes, and bad files (missing, a directory where
// a file belongs, a file where a directory belongs, garbage, empty,
// unreadable). Every other flag of the row is valid (badInputBase), so the
// bad value reaches the command's own checks. Exit 70 means a bug in
// ironbus, so bad input must never reach it, nor a panic.
func TestBadInputNeverReachesExit70(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary about a thousand times")
	}
	fixture := newBadInputFixture(t)
	var rows []badInputRow
	root := newRootCmd(&globalOptions{})
	walkRunnable(root, func(cmd *cobra.Command) {
		path := strings.TrimPrefix(cmd.CommandPath(), "ironbus ")
		if path == "ironbus" {
			path = ""
		}
		if reason, skipped := badInputSkippedCommands[path]; skipped {
			t.Logf("skipping %q: %s", path, reason)
			return
		}
		rows = append(rows, fixture.rowsFor(path, cmd)...)
	})
	started := time.Now()
	failures := runBadInputRows(fixture, rows)
	for _, failure := range failures {
		t.Error(failure)
	}
	t.Logf("%d rows in %v", len(rows), time.Since(started).Round(time.Millisecond))
}

// badInputSkippedCommands are commands this test does not run, with why.
var badInputSkippedCommands = map[string]string{
	// dev serves until it is signalled; its flags are the server
	// helper's (dev.go), and serve's are covered through --print-budget.
	"dev": "serves until signalled (server slice: dev.go)",
	// bench runs load for seconds per row; its flags belong to benchrig.
	"bench": "runs load for seconds per row (bench slice)",
}

// badInputSkippedRows are rows that find a problem owned by another
// slice, keyed "command --flag value-kind", with the owner.
var badInputSkippedRows = map[string]string{}

type badInputRow struct {
	name  string
	args  []string
	stdin string
}

func walkRunnable(cmd *cobra.Command, visit func(*cobra.Command)) {
	if cmd.Runnable() && !cmd.Hidden {
		visit(cmd)
	}
	for _, sub := range cmd.Commands() {
		if sub.Name() != "help" {
			walkRunnable(sub, visit)
		}
	}
}

// badInputFixture is what the rows point at: a live broker, a valid data
// directory, a backup, and files of every bad kind.
type badInputFixture struct {
	t          *testing.T
	root       string
	addr       string
	healthAddr string
	dataDir    string
	backup     string
	token      string
	authConfig string
	configDir  string
	next       atomic.Int64
}

// badGarbage is the content of the garbage files.
var badGarbage = bytes.Repeat([]byte{0xff, 0x00, 'x', '\n', 0x7f}, 400)

// Every row gets bad files of its own: a command may write where it is
// pointed (upgrade --dest, backup --out), and must not change what the
// next row sees.
var (
	badFileKinds = []string{"missing", "directory", "garbage", "empty", "unreadable"}
	badDirKinds  = []string{"missing", "file", "garbage", "unreadable", "through"}
)

// badFile makes a file of the kind, where a command expects a file.
func (f *badInputFixture) badFile(kind string) string {
	path := f.fresh()
	switch kind {
	case "directory":
		f.must(os.Mkdir(path, 0o755))
	case "garbage":
		f.must(os.WriteFile(path, badGarbage, 0o600))
	case "empty":
		f.must(os.WriteFile(path, nil, 0o600))
	case "unreadable": // readable anyway when the tests run as root
		f.must(os.WriteFile(path, []byte("secret\n"), 0o000))
	}
	return path
}

// badDir makes a path of the kind, where a command expects a directory.
func (f *badInputFixture) badDir(kind string) string {
	path := f.fresh()
	switch kind {
	case "file":
		f.must(os.WriteFile(path, badGarbage, 0o600))
	case "garbage":
		f.must(os.Mkdir(path, 0o755))
		for _, name := range []string{"FORMAT", "streams.json", "recovery-report.json", "MANIFEST"} {
			f.must(os.WriteFile(filepath.Join(path, name), badGarbage, 0o600))
		}
	case "unreadable":
		f.must(os.Mkdir(path, 0o000))
		f.t.Cleanup(func() { _ = os.Chmod(path, 0o755) })
	case "through":
		f.must(os.WriteFile(path, badGarbage, 0o600))
		path = filepath.Join(path, "below")
	}
	return path
}

func (f *badInputFixture) must(err error) {
	if err != nil {
		f.t.Fatal(err)
	}
}

func newBadInputFixture(t *testing.T) *badInputFixture {
	root := t.TempDir()
	f := &badInputFixture{t: t, root: root, dataDir: filepath.Join(root, "data"), backup: filepath.Join(root, "backup"),
		token: filepath.Join(root, "token"), authConfig: filepath.Join(root, "auth.toml"), configDir: filepath.Join(root, "config")}
	broker := ironbus.Serve(t, "serve", "--data-dir", filepath.Join(root, "live"), "--addr", "127.0.0.1:0")
	f.addr, f.healthAddr = broker.Addr(), broker.HealthAddr()
	expectCode(t, runCLI(t, "pub", "--addr", f.addr, "one"), exitClean)
	expectCode(t, runCLI(t, "pub", "--addr", f.addr, "--stream", "s", "one"), exitClean)
	expectCode(t, runCLI(t, "stream", "create", "s", "--data-dir", f.dataDir), exitClean)
	expectCode(t, runCLI(t, "backup", "--data-dir", f.dataDir, "--out", f.backup), exitClean)
	expectCode(t, runCLI(t, "token", "create", "--out", f.token), exitClean)
	expectCode(t, runCLI(t, "auth", "add", "--auth-config", f.authConfig, "--name", "n", "--token-file", f.token, "--scopes", "publish"), exitClean)
	return f
}

// fresh is a path nothing holds yet, for an output.
func (f *badInputFixture) fresh() string {
	return filepath.Join(f.root, fmt.Sprintf("fresh-%d", f.next.Add(1)))
}

// base is the valid arguments of a command, so that one bad value at a
// time reaches its checks; positional arguments come first.
func (f *badInputFixture) base(path string) (args []string, stdin string) {
	live := []string{"--addr", f.addr}
	switch path {
	case "auth add":
		return []string{"--auth-config", f.fresh(), "--name", "n", "--token-file", f.token, "--scopes", "publish"}, ""
	case "auth ls":
		return []string{"--auth-config", f.authConfig}, ""
	case "auth rm":
		return []string{"--auth-config", f.fresh(), "--name", "n"}, ""
	case "backup":
		return []string{"--data-dir", f.dataDir, "--out", f.fresh()}, ""
	case "restore":
		return []string{"--from", f.backup, "--data-dir", f.fresh()}, ""
	case "verify", "peek", "dump", "repair", "scrub":
		return []string{"--data-dir", f.dataDir}, ""
	case "dlq peek":
		return []string{"--data-dir", f.dataDir, "--stream", "s"}, ""
	case "cumulative-ack":
		return append(live, "--group", "g", "--up-to", "0"), ""
	case "group info", "group rm":
		return append(live, "--group", "g"), ""
	case "group reset":
		return append(live, "--group", "g", "--to", "earliest"), ""
	case "group ls", "dlq ls", "stream ls":
		return live, ""
	case "dlq redrive":
		return append(live, "--stream", "s"), ""
	case "stream create", "stream info", "stream purge", "stream rm":
		return append([]string{"x"}, live...), ""
	case "stream bind":
		return append([]string{"a.b", "x"}, live...), ""
	case "stream unbind":
		return append([]string{"a.b"}, live...), ""
	case "pub":
		return append([]string{"payload"}, live...), ""
	case "sub":
		return append(live, "--group", "g", "--max", "1", "--wait", "100ms", "--reconnect-wait", "0"), ""
	case "passwd":
		return nil, "password\n"
	case "server info", "server check", "report connections", "report groups", "report recovery", "report storage", "report streams":
		return []string{"--health-addr", f.healthAddr}, ""
	case "top":
		return []string{"--once", "--health-addr", f.healthAddr}, ""
	case "context create":
		return append([]string{"x"}, live...), ""
	case "context use":
		return []string{"x"}, ""
	case "token create":
		return []string{"--out", f.fresh()}, ""
	case "upgrade":
		return []string{"--new-binary", ironbus.Path(), "--dest", f.fresh()}, ""
	case "rollback":
		return []string{"--dest", f.fresh()}, ""
	case "serve":
		// --print-budget checks every setting and exits instead of serving.
		return []string{"--data-dir", f.fresh(), "--addr", "127.0.0.1:0", "--health-addr", "off", "--print-budget"}, ""
	case "config check":
		return []string{f.badFile("garbage")}, ""
	case "completion":
		return []string{"bash"}, ""
	}
	return nil, ""
}

// fileFlags take a file; dirFlags a directory (per command where a name
// means different things).
var (
	fileFlags = []string{"config", "auth-config", "tls-ca", "tls-cert", "tls-key", "tls-client-ca", "token-file",
		"password-file", "new-binary", "dest", "audit-log", "payload-file", "encryption-key-file"}
	dirFlags = []string{"data-dir", "profile-out"}
)

func (f *badInputFixture) flagKind(path, name string) string {
	switch {
	case slices.Contains(fileFlags, name), name == "out" && (path == "token create" || path == "key create"):
		return "file"
	case slices.Contains(dirFlags, name), name == "out" && path == "backup", name == "from" && path == "restore":
		return "dir"
	}
	return ""
}

// rowsFor is every bad-input row of one command.
func (f *badInputFixture) rowsFor(path string, cmd *cobra.Command) []badInputRow {
	var rows []badInputRow
	add := func(what string, extra ...string) {
		args, stdin := f.base(path)
		full := append(strings.Fields(path), args...)
		rows = append(rows, badInputRow{name: path + " " + what, args: append(full, extra...), stdin: stdin})
	}
	add("--no-such-flag", "--no-such-flag")
	add("a stray argument", "stray-1", "stray-2", "stray-3")
	if path == "config check" {
		for _, kind := range badFileKinds {
			rows = append(rows, badInputRow{name: "config check FILE " + kind, args: []string{"config", "check", f.badFile(kind)}})
		}
	}
	visit := func(flag *pflag.Flag) {
		if flag.Name == "help" || flag.Name == "verbose" {
			return
		}
		switch kind := f.flagKind(path, flag.Name); {
		case kind == "file":
			for _, what := range badFileKinds {
				add("--"+flag.Name+" "+what, "--"+flag.Name, f.badFile(what))
			}
			return
		case kind == "dir":
			for _, what := range badDirKinds {
				add("--"+flag.Name+" "+what, "--"+flag.Name, f.badDir(what))
			}
			return
		}
		for _, value := range badValues(flag.Value.Type()) {
			if flag.Value.Type() == "bool" {
				add("--"+flag.Name+"="+value, "--"+flag.Name+"="+value)
				continue
			}
			add("--"+flag.Name+" "+shortValue(value), "--"+flag.Name, value)
		}
	}
	cmd.NonInheritedFlags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return rows
}

// badValues is the malformed, negative, zero and huge values of a flag type.
func badValues(kind string) []string {
	switch kind {
	case "bool":
		return []string{"maybe"}
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "count":
		return []string{"-1", "0", "2147483647", "99999999999999999999999", "1e400", "abc", ""}
	case "duration":
		return []string{"-1s", "0s", "2562047h", "9999999999h", "abc", "10"}
	case "size":
		return []string{"-1", "0", "1", "16EiB", "99999EiB", "abc", "1.5.5MiB"}
	case "stringArray", "stringSlice":
		return []string{"", "=", ",,,", strings.Repeat("x", 70_000)}
	}
	// strings, choices and flag types of their own
	return []string{"", "nosuch", "-1", strings.Repeat("x", 70_000), "../../etc"}
}

func shortValue(value string) string {
	if len(value) > 20 {
		return fmt.Sprintf("<%d bytes>", len(value))
	}
	if value == "" {
		return `""`
	}
	return value
}

// runBadInputRows runs the rows a few at a time and returns a line per row
// that exited 70, panicked or hung.
func runBadInputRows(f *badInputFixture, rows []badInputRow) []string {
	var (
		mu       sync.Mutex
		failures []string
		wg       sync.WaitGroup
	)
	work := make(chan badInputRow)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for row := range work {
				if failure := f.runRow(row); failure != "" {
					mu.Lock()
					failures = append(failures, failure)
					mu.Unlock()
				}
			}
		}()
	}
	for _, row := range rows {
		work <- row
	}
	close(work)
	wg.Wait()
	slices.Sort(failures)
	return failures
}

// runRow runs one row and describes what is wrong with its outcome ("" for
// nothing): exit 70, a panic or a runtime crash, or no exit in time.
func (f *badInputFixture) runRow(row badInputRow) string {
	if _, skipped := badInputSkippedRows[row.name]; skipped {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	command := ironbus.Command(row.args...)
	command = exec.CommandContext(ctx, command.Path, command.Args[1:]...)
	command.Env = append(os.Environ(), "IRONBUS_CONFIG_DIR="+filepath.Join(f.configDir, fmt.Sprint(f.next.Add(1))), "IRONBUS_ADDR="+f.addr)
	command.Stdin = strings.NewReader(row.stdin)
	var stdout, stderr bytes.Buffer
	command.Stdout, command.Stderr = &stdout, &stderr
	err := command.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return fmt.Sprintf("%s: did not exit in 20 s", row.name)
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		return fmt.Sprintf("%s: %v", row.name, err)
	}
	text := stderr.String()
	if os.Getenv("BADINPUT_LOG") != "" { // every row's outcome, to review the messages

		fmt.Fprintf(os.Stderr, "ROW %d %s | %s\n", code, row.name, firstLines(text, 1))
	}
	if code == exitInternal || strings.Contains(text, "panic:") || goroutineTrace.MatchString(text) || strings.Contains(text, "fatal error:") {
		return fmt.Sprintf("%s: exit %d\n%s", row.name, code, firstLines(text, 6))
	}
	return ""
}

// goroutineTrace matches the header of a goroutine in a crash dump.
var goroutineTrace = regexp.MustCompile(`goroutine \d+ \[`)

func firstLines(text string, n int) string {
	lines := strings.SplitN(text, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// TestOfflineChangesNeverCreate: the offline commands that change a data
// directory refuse a missing one (exit 2) instead of making it, and
// settling a group of a stream the directory lacks makes no stream.
func TestOfflineChangesNeverCreate(t *testing.T) {
	root := t.TempDir()
	missing := filepath.Join(root, "missing")
	for _, args := range [][]string{
		{"cumulative-ack", "--data-dir", missing, "--group", "g", "--up-to", "1"},
		{"group", "reset", "--data-dir", missing, "--group", "g", "--to", "earliest"},
		{"group", "rm", "--data-dir", missing, "--group", "g"},
		{"stream", "rm", "x", "--force", "--data-dir", missing},
		{"stream", "bind", "a.b", "x", "--data-dir", missing},
		{"stream", "unbind", "a.b", "--data-dir", missing},
	} {
		expectCode(t, runCLI(t, args...), exitNotFound)
		if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%q made the data directory", args)
		}
	}
	dataDir := filepath.Join(root, "data")
	expectCode(t, runCLI(t, "stream", "create", "s", "--data-dir", dataDir), exitClean)
	settle := runCLI(t, "cumulative-ack", "--data-dir", dataDir, "--stream", "nosuch", "--group", "g", "--up-to", "1")
	expectCode(t, settle, exitNotFound)
	if _, err := os.Stat(filepath.Join(dataDir, "streams", "nosuch")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("cumulative-ack --data-dir made the stream it was asked to settle")
	}
}
