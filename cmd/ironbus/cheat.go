package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// cheatSheet is one screen of the common tasks. Every line starting with
// "ironbus" (after a pipe, too) is checked by a test to name a real command
// with real flags, so the sheet cannot drift from the binary.
const cheatSheet = `IronBus cheat sheet (ironbus <command> --help tells the rest)

Run a broker
  ironbus dev                               throwaway broker and data dir, for trying things
  ironbus serve --data-dir /var/lib/ironbus  the durable broker, on 127.0.0.1:7777

Name it once
  ironbus context create pi --addr 10.0.0.7:7777 --data-dir /var/lib/ironbus --use
  ironbus context ls                        * marks the current context
  ironbus context use pi                    later commands default to its --addr / --data-dir

Publish (the offset prints once the record is durable; lz4 by default)
  ironbus pub hello
  ironbus pub --stream orders --key customer-42 --header source=cli '{"total":12}'
  seq 1 1000 | ironbus pub --stream numbers --window 256 --compress zstd

Consume
  ironbus sub --group demo --max 10 --ack
  ironbus sub --stream orders --group billing --key-shared --ack
  ironbus sub --stream orders --group audit --streaming --from earliest --ack
  ironbus group info --stream orders --group billing
  ironbus dlq ls

Watch a running broker (through serve --health-addr)
  ironbus top                               live screen: s sort, / filter, q quit
  ironbus top --once --interval 2s          one screen with rates, for logs

Inspect a data directory (read-only; while the broker is stopped)
  ironbus verify --data-dir /var/lib/ironbus
  ironbus peek --data-dir /var/lib/ironbus --stream orders --from 1000 --limit 5
  ironbus dump --data-dir /var/lib/ironbus --stream orders | jq -r .payload
  ironbus repair --data-dir /var/lib/ironbus          dry run; --apply to change

Scripts: --json on every command. Exit codes: 0 ok, 1 usage, 2 not found,
3 damage, 4 unreadable, 5 locked or unreachable, 70 bug.
Completion: source <(ironbus completion bash)   (zsh, fish: see --help)
`

func newCheatCmd(opts *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cheat",
		Short: "One screen of the common tasks, with examples that work",
		Long: `Print a one-screen cheat sheet: starting a broker, naming it with a
context, publishing, consuming, inspecting a data directory, and the exit
codes scripts branch on. Each command has the whole story in --help.`,
		Example: "  ironbus cheat\n  ironbus cheat | grep sub",
		Args:    cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the sheet as one JSON object (schema ironbus.cli.cheat.v1): sections of command and note")
	cmd.RunE = classified(func() error {
		if opts.json {
			return writeJSON(opts.stdout, cheatOutput{Schema: "ironbus.cli.cheat.v1", Sections: parseCheatSheet(cheatSheet)})
		}
		_, err := fmt.Fprint(opts.stdout, cheatSheet)
		return err
	})
	return cmd
}

type cheatOutput struct {
	Schema   string         `json:"schema"`
	Sections []cheatSection `json:"sections"`
}

type cheatSection struct {
	Title    string         `json:"title"`
	Examples []cheatExample `json:"examples"`
}

type cheatExample struct {
	Command string `json:"command"`
	Note    string `json:"note,omitempty"`
}

// splitNote splits an example line of the sheet at its first run of two
// or more blanks into the command and its note (none when there is no such
// run), as the sheet's layout puts at least two spaces between them.
func splitNote(line string) (command, note string) {
	for i := 0; i+1 < len(line); i++ {
		if isBlank(line[i]) && isBlank(line[i+1]) {
			end := i + 2
			for end < len(line) && isBlank(line[end]) {
				end++
			}
			return line[:i], line[end:]
		}
	}
	return line, ""
}

// isBlank reports whether b is one of the spaces a line of the sheet can
// hold between its command and its note.
func isBlank(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\f' || b == '\r'
}

// parseCheatSheet splits the sheet into its titled sections of indented
// examples; the closing lines (not indented, after a blank) are left out.
func parseCheatSheet(sheet string) []cheatSection {
	var sections []cheatSection
	for _, line := range strings.Split(sheet, "\n")[1:] {
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "  ") && len(sections) > 0:
			command, note := splitNote(strings.TrimSpace(line))
			example := cheatExample{Command: command, Note: note}
			last := &sections[len(sections)-1]
			last.Examples = append(last.Examples, example)
		default:
			sections = append(sections, cheatSection{Title: line})
		}
	}
	kept := sections[:0]
	for _, section := range sections {
		if len(section.Examples) > 0 {
			kept = append(kept, section)
		}
	}
	return kept
}
