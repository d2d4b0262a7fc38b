package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The prose of docs/ and README.md names flags by hand. This test reads
// every code span and code block in them, finds each ironbus invocation
// (`ironbus stream create orders --partitions 4`, also a span that starts
// with a command's name, `serve --edge`) and each span made of flags alone
// (`--durability sync`), and checks every --flag against the command tree:
// a flag of that command (its own or inherited); for a span of flags
// alone, a flag of the command the section's heading names (or of one of
// its subcommands), or with no such heading a flag of some command. The generated reference (docs/CLI.md from
// its marker on, docs/man) is generated from the tree and not read.

// docFlagFinding is one flag a document names that its command lacks.
type docFlagFinding struct {
	file     string
	line     int
	commands []string // none when the mention names no command
	section  bool     // the commands are the section heading's
	flag     string
}

func (f docFlagFinding) String() string {
	where := fmt.Sprintf("%s:%d: --%s", f.file, f.line, f.flag)
	switch {
	case len(f.commands) == 0:
		return where + " is a flag of no command"
	case f.section:
		return fmt.Sprintf("%s is a flag of none of `%s` (the section's) and their subcommands", where, strings.Join(f.commands, "`, `"))
	}
	return fmt.Sprintf("%s is not a flag of `%s`", where, f.commands[0])
}

func TestDocFlagsExist(t *testing.T) {
	root := newRootCmd(&globalOptions{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	checker := newDocFlagChecker(root)
	top := filepath.Join("..", "..")
	files := []string{filepath.Join(top, "README.md")}
	err := filepath.WalkDir(filepath.Join(top, "docs"), func(path string, entry os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entry.IsDir() && entry.Name() == "man" {
			return filepath.SkipDir
		}
		if !entry.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, path := range files {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(top, path)
		document := string(text)
		if cut := strings.Index(document, referenceBegin); cut >= 0 {
			document = document[:cut]
		}
		findings, mentions := checker.check(name, document)
		checked += mentions
		for _, finding := range findings {
			t.Error(finding)
		}
	}
	// A parser that silently stopped finding anything would pass; the docs
	// name hundreds of flags.
	t.Logf("checked %d flag mentions in %d files", checked, len(files))
	if checked < 200 {
		t.Errorf("checked only %d flag mentions: the scanner is broken", checked)
	}
}

// TestDocFlagsScanner pins what counts as a mention, so the real test can
// be neither blind nor noisy.
func TestDocFlagsScanner(t *testing.T) {
	root := newRootCmd(&globalOptions{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	checker := newDocFlagChecker(root)
	document := strings.Join([]string{
		"Run `ironbus serve --edge --no-such-one` and `serve --data-dir d`.",
		"A span of flags alone: `--durability sync` and `--made-up`, `--once/--jsn`.",
		"Other programs are theirs: `curl --cacert ca.pem`, `go test -run X`.",
		"A wrapped span `ironbus stream create orders",
		"--partitions 4 --bogus`.",
		"",
		"```sh",
		"$ IRONBUS_X=1 ironbus bench --producers 8 \\",
		"    --pubwindow 1 --wrong   # a --comment-flag is not read",
		"ironbus serve --data-dir /var/lib/ironbus --edge | ironbus sub --nope",
		"ExecStart=/usr/local/bin/ironbus serve --config /etc/ironbus/ironbus.toml",
		"go run ./cmd/ironbus verify --data-dir d --wrong-too",
		"```",
		"Past the block: `ironbus <command> --json` names no command, `ironbus bench … --jsno` does.",
		"## `ironbus group`",
		"A section's flags: `--to latest`, `--group g`, `--edge`.",
		"### JSON: `ironbus.cli.groups.v1`",
		"Still the section of group: `--json`, `--partitions`.",
		"## Examples",
		"No command here: `--partitions` and `--nothing`.",
	}, "\n")
	findings, mentions := checker.check("doc.md", document)
	var got []string
	for _, finding := range findings {
		got = append(got, finding.String())
	}
	want := []string{
		"doc.md:1: --no-such-one is not a flag of `ironbus serve`",
		"doc.md:2: --made-up is a flag of no command",
		"doc.md:2: --jsn is a flag of no command",
		"doc.md:4: --bogus is not a flag of `ironbus stream create`",
		"doc.md:8: --wrong is not a flag of `ironbus bench`",
		"doc.md:10: --nope is not a flag of `ironbus sub`",
		"doc.md:12: --wrong-too is not a flag of `ironbus verify`",
		"doc.md:14: --jsno is not a flag of `ironbus bench`",
		"doc.md:16: --edge is a flag of none of `ironbus group` (the section's) and their subcommands",
		"doc.md:18: --partitions is a flag of none of `ironbus group` (the section's) and their subcommands",
		"doc.md:20: --nothing is a flag of no command",
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if mentions != 27 {
		t.Errorf("counted %d mentions, want 27", mentions)
	}
}

type docFlagChecker struct {
	root *cobra.Command
	any  map[string]bool // every flag of every command
}

func newDocFlagChecker(root *cobra.Command) *docFlagChecker {
	checker := &docFlagChecker{root: root, any: map[string]bool{"help": true}}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		cmd.Flags().VisitAll(func(flag *pflag.Flag) { checker.any[flag.Name] = true })
		cmd.PersistentFlags().VisitAll(func(flag *pflag.Flag) { checker.any[flag.Name] = true })
		for _, child := range cmd.Commands() {
			walk(child)
		}
	}
	walk(root)
	return checker
}

// codeSpan is a piece of code with the line it starts on: an inline span,
// or one logical line of a fenced block (continuations joined).
type codeSpan struct {
	line  int
	text  string
	scope []string // the code spans of the headings above it, innermost first
}

var (
	inlineSpan  = regexp.MustCompile("`+([^`]+)`+")
	flagToken   = regexp.MustCompile(`^--([a-z][a-z0-9-]*)(=.*)?$`)
	programWord = regexp.MustCompile(`(^|[=/])ironbus$`)
	assignment  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// check returns the findings of one document and how many flag mentions
// it checked.
func (c *docFlagChecker) check(name, document string) ([]docFlagFinding, int) {
	var findings []docFlagFinding
	mentions := 0
	for _, span := range codeSpans(document) {
		for _, command := range splitCommands(span.text) {
			path, flags := c.invocation(command)
			section := c.section(span.scope)
			for _, flag := range flags {
				mentions++
				if finding, bad := c.judge(path, section, flag); bad {
					finding.file, finding.line = name, span.line
					findings = append(findings, finding)
				}
			}
		}
	}
	return findings, mentions
}

// judge says whether flag, named for the command at path, is missing.
// A mention that names no command (path nil) belongs to the commands its
// section's heading names, their subcommands included, or with no such
// heading to any command.
func (c *docFlagChecker) judge(path *cobra.Command, section []*cobra.Command, flag string) (docFlagFinding, bool) {
	if path != nil {
		if c.hasFlag(path, flag) {
			return docFlagFinding{}, false
		}
		return docFlagFinding{commands: []string{path.CommandPath()}, flag: flag}, true
	}
	if len(section) == 0 {
		return docFlagFinding{flag: flag}, !c.any[flag]
	}
	var names []string
	for _, command := range section {
		if c.hasFlagBelow(command, flag) {
			return docFlagFinding{}, false
		}
		names = append(names, command.CommandPath())
	}
	return docFlagFinding{commands: names, section: true, flag: flag}, true
}

func (c *docFlagChecker) hasFlag(command *cobra.Command, flag string) bool {
	return flag == "help" || command.Flags().Lookup(flag) != nil || command.InheritedFlags().Lookup(flag) != nil
}

func (c *docFlagChecker) hasFlagBelow(command *cobra.Command, flag string) bool {
	if c.hasFlag(command, flag) {
		return true
	}
	return slices.ContainsFunc(command.Commands(), func(child *cobra.Command) bool { return c.hasFlagBelow(child, flag) })
}

// section resolves the code spans of a span's headings to the commands
// the innermost heading that names any names.
func (c *docFlagChecker) section(scope []string) []*cobra.Command {
	for _, heading := range scope {
		var commands []*cobra.Command
		for _, text := range strings.Split(heading, "\x00") {
			words := strings.Fields(text)
			if len(words) == 0 || !programWord.MatchString(words[0]) {
				continue
			}
			if command, _ := c.invocation(words); command != nil && command != c.root {
				commands = append(commands, command)
			}
		}
		if len(commands) > 0 {
			return commands
		}
	}
	return nil
}

// codeSpans returns the inline code spans of every paragraph (a span may
// wrap onto the next line) and every logical line of every fenced block.
func codeSpans(document string) []codeSpan {
	var spans []codeSpan
	scanner := bufio.NewScanner(strings.NewReader(document))
	scanner.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	var (
		fence     string
		paragraph strings.Builder
		lineOf    []int // the line of each byte of paragraph
		pending   codeSpan
		number    int
		headings  [7]string // the code spans of the current heading at each level
	)
	scope := func() []string {
		var innermostFirst []string
		for level := len(headings) - 1; level > 0; level-- {
			if headings[level] != "" {
				innermostFirst = append(innermostFirst, headings[level])
			}
		}
		return innermostFirst
	}
	flushParagraph := func() {
		text := paragraph.String()
		for _, match := range inlineSpan.FindAllStringSubmatchIndex(text, -1) {
			spans = append(spans, codeSpan{line: lineOf[match[2]], text: text[match[2]:match[3]], scope: scope()})
		}
		paragraph.Reset()
		lineOf = lineOf[:0]
	}
	for scanner.Scan() {
		number++
		line := scanner.Text()
		trimmed := strings.TrimSpace(line)
		if fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")) {
			flushParagraph()
			fence = trimmed[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
				continue
			}
			if pending.text == "" {
				pending.line, pending.scope = number, scope()
			}
			if continued, ok := strings.CutSuffix(strings.TrimRight(line, " "), "\\"); ok {
				pending.text += continued + " "
				continue
			}
			pending.text += line
			spans = append(spans, pending)
			pending = codeSpan{}
			continue
		}
		if trimmed == "" {
			flushParagraph()
			continue
		}
		if level := len(trimmed) - len(strings.TrimLeft(trimmed, "#")); level > 0 && level < len(headings) &&
			strings.HasPrefix(trimmed[level:], " ") {
			flushParagraph()
			var names []string
			for _, match := range inlineSpan.FindAllStringSubmatch(trimmed, -1) {
				names = append(names, match[1])
			}
			headings[level] = strings.Join(names, "\x00")
			for deeper := level + 1; deeper < len(headings); deeper++ {
				headings[deeper] = ""
			}
			continue
		}
		for range len(line) + 1 {
			lineOf = append(lineOf, number)
		}
		paragraph.WriteString(line + " ")
	}
	flushParagraph()
	return spans
}

// splitCommands cuts a line of shell into its commands, each without its
// comment or prompt.
func splitCommands(text string) [][]string {
	if cut := strings.Index(text, " #"); cut >= 0 {
		text = text[:cut]
	}
	var commands [][]string
	var current []string
	for _, word := range strings.Fields(text) {
		switch word {
		case "|", "||", "&&", ";", "&":
			commands = append(commands, current)
			current = nil
			continue
		}
		if rest, ok := strings.CutSuffix(word, ";"); ok {
			current = append(current, rest)
			commands = append(commands, current)
			current = nil
			continue
		}
		current = append(current, strings.TrimPrefix(word, "$("))
	}
	return append(commands, current)
}

// invocation finds the command a shell command runs and the flags it
// names. It returns (nil, flags) for a command made of flags alone, and no
// flags for a program other than ironbus.
func (c *docFlagChecker) invocation(words []string) (*cobra.Command, []string) {
	start := 0
	for start < len(words) && isPrefixWord(words[start]) {
		start++
	}
	if start == len(words) {
		return nil, nil
	}
	words = words[start:]
	if len(words) > 2 && words[0] == "go" && words[1] == "run" && programWord.MatchString(words[2]) {
		words = words[2:] // go run ./cmd/ironbus verify ...
	}
	var command *cobra.Command
	switch {
	case strings.HasPrefix(words[0], "--"):
		return nil, flagsOf(words)
	case programWord.MatchString(words[0]):
		command, words = c.root, words[1:]
	case isChild(c.root, words[0]):
		command = c.root
	default:
		return nil, nil
	}
	// Walk down the tree while the words name subcommands; a placeholder
	// (`<command>`) where a subcommand would be leaves the command unknown.
	for len(words) > 0 && !strings.HasPrefix(words[0], "-") {
		child := childNamed(command, words[0])
		if child == nil {
			if command.HasSubCommands() && (strings.ContainsAny(words[0], "<[{…") || words[0] == "...") {
				return nil, flagsOf(words)
			}
			break
		}
		command, words = child, words[1:]
	}
	return command, flagsOf(words)
}

func isPrefixWord(word string) bool {
	switch word {
	case "$", "#", "sudo", "exec", "time", "nohup", "env":
		return true
	}
	return assignment.MatchString(word) && !programWord.MatchString(word)
}

func isChild(command *cobra.Command, name string) bool { return childNamed(command, name) != nil }

func childNamed(command *cobra.Command, name string) *cobra.Command {
	for _, child := range command.Commands() {
		if child.Name() == name || slices.Contains(child.Aliases, name) {
			return child
		}
	}
	return nil
}

// flagsOf returns the flags named in words, also those joined by a slash
// or a bar (`--tls-cert/--tls-key`, `--once|--json`).
func flagsOf(words []string) []string {
	var flags []string
	for _, word := range words {
		if word == "--" {
			break
		}
		for _, piece := range strings.FieldsFunc(word, func(r rune) bool { return r == '/' || r == '|' }) {
			if !strings.HasPrefix(piece, "--") {
				break // a path or a value: --data-dir=/var/lib/ironbus
			}
			if match := flagToken.FindStringSubmatch(strings.TrimRight(piece, ".,;:)")); match != nil {
				flags = append(flags, match[1])
			}
		}
	}
	return flags
}
