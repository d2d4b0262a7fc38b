package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

// TestBrokerErrorCodes pins what every client command exits with for each
// kind of answer, so no answer of the broker reaches exit 70.
func TestBrokerErrorCodes(t *testing.T) {
	lost := fmt.Errorf("%w (127.0.0.1:7777): server closed the connection", client.ErrConnectionLost)
	for _, tc := range []struct {
		name string
		err  error
		code int
		says []string
	}{
		{"no such stream", wire.NewError(wire.CodeNotFound, `stream "typo" does not exist`), exitNotFound,
			[]string{`stream "typo" does not exist (not_found)`, "ironbus stream ls", "ironbus stream create typo"}},
		{"wrong credentials", wire.NewError(wire.CodeNotAuthorized, "not authorized"), exitNotAuthorized, []string{"not authorized", "--token-file"}},
		{"no scope", wire.NewError(wire.CodePermissionDenied, "no subscribe permission"), exitNotAuthorized, []string{"not authorized", "scope"}},
		{"removed identity", fmt.Errorf("%w: %w", client.ErrConnectionLost, wire.NewError(wire.CodeNotAuthorized, "x")), exitNotAuthorized, nil},
		{"connection lost", lost, exitUnreachable, []string{"connection to the broker broke"}},
		{"closed", client.ErrClosed, exitUnreachable, nil},
		{"too large here", fmt.Errorf("%w: record body of 9 bytes", client.ErrRecordTooLarge), exitRefused, []string{"max_frame"}},
		{"too large there", wire.NewError(wire.CodeRecordTooLarge, "too large"), exitRefused, []string{"max_frame"}},
		{"bad name", wire.NewError(wire.CodeInvalidName, "invalid group name"), exitUsage, nil},
		{"bad argument", fmt.Errorf("%w: empty group name", client.ErrInvalidArgument), exitUsage, nil},
		{"refused", wire.NewError(wire.CodeGroupModeMismatch, "a work group"), exitRefused, []string{"a work group (group_mode_mismatch)"}},
		{"refused, wrapped", fmt.Errorf("record 1 was not stored: %w", &wire.Error{Code: wire.CodeNoSpace, Retryable: true, RetryAfter: time.Second, Message: "disk full"}),
			exitRefused, []string{"record 1 was not stored: disk full (no_space, retryable after 1s)"}},
		{"quota", &wire.Error{Code: wire.CodeQuotaExceeded, Retryable: true, RetryAfter: time.Second, Message: `identity "w" is at its max_streams quota (1)`},
			exitRefused, []string{"max_streams", "retryable after 1s", "ironbus auth ls"}},
		{"already classified", exitErrorf(exitNotFound, "x"), exitNotFound, nil},
	} {
		err := brokerError(tc.err, "typo")
		if got := exitCodeOf(err); got != tc.code {
			t.Errorf("%s: exit %d, want %d (%v)", tc.name, got, tc.code, err)
		}
		for _, want := range tc.says {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", tc.name, err.Error(), want)
			}
		}
	}
	if connectionLost(fmt.Errorf("%w: %w", client.ErrConnectionLost, wire.NewError(wire.CodeNotAuthorized, "x"))) {
		t.Error("refused credentials count as a lost connection: sub would redial in vain")
	}
	if !connectionLost(lost) || !connectionLost(wire.NewError(wire.CodeShuttingDown, "draining")) {
		t.Error("a lost connection or a draining broker is not seen as lost")
	}
	if !errors.Is(adminError(client.ErrGroupActive, "s"), client.ErrGroupActive) || exitCodeOf(adminError(client.ErrGroupActive, "s")) != exitRefused {
		t.Error("group_active is not a refusal")
	}
}

// TestPubRefusesOversizedRecords: a payload over the broker's limit, as an
// argument or as a stdin line longer than any buffer, is a refusal (3)
// naming the limit and the setting that raises it.
func TestPubRefusesOversizedRecords(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--max-frame", "64KiB")
	big := strings.Repeat("a", 100_000)
	argument := runCLI(t, "pub", "--addr", broker.Addr(), big)
	expectCode(t, argument, exitRefused)
	line := ironbus.Command("pub", "--addr", broker.Addr())
	line.Stdin = strings.NewReader("small\n" + strings.Repeat("b", 300_000) + "\nnever\n")
	out, err := line.CombinedOutput()
	var exit interface{ ExitCode() int }
	if !errors.As(err, &exit) || exit.ExitCode() != exitRefused {
		t.Fatalf("an oversized stdin line: %v\n%s", err, out)
	}
	for _, text := range []string{argument.stderr, string(out)} {
		if !strings.Contains(text, "max_frame") || !strings.Contains(text, "65536") {
			t.Errorf("the refusal does not name the limit and the setting: %s", text)
		}
	}
	if !strings.HasPrefix(string(out), "0\n") || !strings.Contains(string(out), "line 2 of standard input") {
		t.Errorf("the line before the oversized one is not published, or the line is not named: %s", out)
	}
}

// TestSubPrintsHeaders: sub shows a record's headers in both forms.
func TestSubPrintsHeaders(t *testing.T) {
	broker := ironbus.Serve(t, "serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	expectCode(t, runCLI(t, "pub", "--addr", broker.Addr(), "--header", "source=cli", "--header", "trace=a b", "--key", "k", "hello"), exitClean)
	human := runCLI(t, "sub", "--addr", broker.Addr(), "--group", "human", "--max", "1")
	expectCode(t, human, exitClean)
	if got := strings.TrimSpace(human.stdout); got != `#0 key=k headers={source=cli trace="a b"} payload=hello` {
		t.Errorf("sub printed %q", got)
	}
	machine := runCLI(t, "sub", "--addr", broker.Addr(), "--group", "machine", "--max", "1", "--json")
	expectCode(t, machine, exitClean)
	var delivery struct {
		Headers []headerOutput `json:"headers"`
	}
	if err := json.Unmarshal([]byte(machine.stdout), &delivery); err != nil {
		t.Fatal(err)
	}
	want := []headerOutput{{"source", "cli", "text"}, {"trace", "a b", "text"}}
	if fmt.Sprint(delivery.Headers) != fmt.Sprint(want) {
		t.Errorf("sub --json headers %v, want %v", delivery.Headers, want)
	}
}
