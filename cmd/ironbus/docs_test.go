package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

// The command reference in docs/CLI.md and the man pages in docs/man are
// generated from the cobra tree, so they cannot drift from --help. This
// test fails when they are stale; `make docs` regenerates them.

const (
	referenceBegin = "<!-- reference:begin (generated from the command tree by `make docs`; do not edit) -->"
	referenceEnd   = "<!-- reference:end -->"
	updateDocsEnv  = "IRONBUS_UPDATE_DOCS"
)

// manualDate is the date the man pages carry: fixed, so regenerating them
// changes a page only when its command changed.
var manualDate = time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)

func TestGeneratedDocsAreFresh(t *testing.T) {
	update := os.Getenv(updateDocsEnv) != ""
	root := newRootCmd(&globalOptions{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	root.DisableAutoGenTag = true

	cliPath := filepath.Join("..", "..", "docs", "CLI.md")
	manual, err := os.ReadFile(cliPath)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := bytes.Index(manual, []byte(referenceBegin)), bytes.Index(manual, []byte(referenceEnd))
	if begin < 0 || end < begin {
		t.Fatalf("%s lacks the %q … %q markers", cliPath, referenceBegin, referenceEnd)
	}
	fresh := renderReference(root)
	current := string(manual[begin+len(referenceBegin) : end])
	if current != fresh {
		if !update {
			t.Errorf("the command reference in docs/CLI.md is stale: run `make docs` and commit the result")
		} else {
			updated := string(manual[:begin+len(referenceBegin)]) + fresh + string(manual[end:])
			if err := os.WriteFile(cliPath, []byte(updated), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkManPages(t, root, filepath.Join("..", "..", "docs", "man"), update)
}

// checkManPages generates the man pages into a temporary directory and
// compares them with dir (or replaces dir's pages when updating).
func checkManPages(t *testing.T, root *cobra.Command, dir string, update bool) {
	t.Helper()
	generated := t.TempDir()
	header := &doc.GenManHeader{Title: "IRONBUS", Section: "1", Source: "IronBus", Manual: "IronBus Manual", Date: &manualDate}
	if err := doc.GenManTree(root, header, generated); err != nil {
		t.Fatal(err)
	}
	want := readPages(t, generated)
	have := readPages(t, dir)
	if update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name := range have {
			if _, ok := want[name]; !ok {
				_ = os.Remove(filepath.Join(dir, name))
			}
		}
		for name, page := range want {
			if err := os.WriteFile(filepath.Join(dir, name), page, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for name, page := range want {
		if !bytes.Equal(have[name], page) {
			t.Errorf("man page %s is stale or missing: run `make docs` and commit the result", name)
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			t.Errorf("man page %s belongs to no command: run `make docs`", name)
		}
	}
}

func readPages(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	pages := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return pages
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		if strings.HasSuffix(entry.Name(), ".1") {
			page, err := os.ReadFile(filepath.Join(dir, entry.Name()))
			if err != nil {
				t.Fatal(err)
			}
			pages[entry.Name()] = page
		}
	}
	return pages
}

// renderReference writes every visible command: what it does, its usage
// line and a table of its own flags; the flags every command inherits are
// listed once at the top.
func renderReference(root *cobra.Command) string {
	var out strings.Builder
	out.WriteString("\n\n## Command reference\n\nEvery command, its usage and its flags, as `--help` prints them.\n")
	if global := visibleFlags(root.PersistentFlags()); len(global) > 0 {
		out.WriteString("Every command also takes:\n\n")
		writeFlagTable(&out, global)
	}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd != root && (!cmd.IsAvailableCommand() || cmd.Name() == "help") {
			return
		}
		if cmd != root {
			fmt.Fprintf(&out, "\n### `%s`\n\n%s\n\n```\n%s\n```\n", cmd.CommandPath(), cmd.Short, cmd.UseLine())
			if len(cmd.Aliases) > 0 {
				fmt.Fprintf(&out, "\nAliases: %s\n", strings.Join(cmd.Aliases, ", "))
			}
			if flags := visibleFlags(cmd.LocalNonPersistentFlags()); len(flags) > 0 {
				out.WriteString("\n")
				writeFlagTable(&out, flags)
			}
		}
		children := slices.Clone(cmd.Commands())
		slices.SortFunc(children, func(a, b *cobra.Command) int { return strings.Compare(a.Name(), b.Name()) })
		for _, child := range children {
			walk(child)
		}
	}
	walk(root)
	out.WriteString("\n")
	return out.String()
}

func visibleFlags(set *pflag.FlagSet) []*pflag.Flag {
	var flags []*pflag.Flag
	set.VisitAll(func(flag *pflag.Flag) {
		if !flag.Hidden && flag.Name != "help" {
			flags = append(flags, flag)
		}
	})
	return flags
}

func writeFlagTable(out *strings.Builder, flags []*pflag.Flag) {
	out.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	for _, flag := range flags {
		name := "--" + flag.Name
		if flag.Shorthand != "" {
			name = "-" + flag.Shorthand + ", " + name
		}
		value := flag.DefValue
		if value == "" || value == "[]" {
			value = " "
		} else {
			value = "`" + value + "`"
		}
		usage := flag.Usage
		if flag.Deprecated != "" {
			usage += " (deprecated: " + flag.Deprecated + ")"
		}
		fmt.Fprintf(out, "| `%s` | %s | %s |\n", name, value, escapeCell(usage))
	}
}

func escapeCell(text string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(text)
}
