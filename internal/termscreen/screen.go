package termscreen

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/term"
)

const (
	// enterScreen switches to the alternate screen, so quitting gives the
	// terminal back as it was, hides the cursor and titles the window.
	enterScreen = "\x1b[?1049h\x1b[?25l\x1b]2;ironbus top\x07"
	leaveScreen = "\x1b[?25h\x1b[?1049l"
	// sizePoll is how often the terminal's size is read: polling works on
	// every platform, where SIGWINCH does not exist on Windows.
	sizePoll = 250 * time.Millisecond
)

// Run shows model on terminal, reading keys from input, until the
// model quits or ctx ends (both a normal way to leave).
func Run(ctx context.Context, model tea.Model, input io.Reader, terminal *os.File) error {
	if file, ok := input.(*os.File); ok && term.IsTerminal(file.Fd()) {
		state, err := term.MakeRaw(file.Fd())
		if err != nil {
			return fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		defer func() { _ = term.Restore(file.Fd(), state) }()
	}
	restore := enableEscapeCodes(terminal)
	defer restore()
	if _, err := io.WriteString(terminal, enterScreen); err != nil {
		return err
	}
	defer func() { _, _ = io.WriteString(terminal, leaveScreen) }()

	done := make(chan struct{})
	defer close(done)
	messages := make(chan tea.Msg, 16)
	send := func(msg tea.Msg) bool {
		select {
		case messages <- msg:
			return true
		case <-done:
			return false
		}
	}
	run := func(cmd tea.Cmd) {
		if cmd != nil {
			go func() {
				if msg := cmd(); msg != nil {
					send(msg)
				}
			}()
		}
	}
	// The reader may stay blocked in Read after the screen closes; the
	// command returns, and the process with it.
	go readKeys(input, send)
	run(model.Init())

	poll := time.NewTicker(sizePoll)
	defer poll.Stop()
	width, height, drawn := -1, -1, ""
	for {
		if w, h, err := term.GetSize(terminal.Fd()); err == nil && (w != width || h != height) {
			width, height, drawn = w, h, ""
			var cmd tea.Cmd
			model, cmd = model.Update(tea.WindowSizeMsg{Width: w, Height: h})
			run(cmd)
		}
		if frame := model.View().Content; frame != drawn {
			if err := drawFrame(terminal, frame); err != nil {
				return err
			}
			drawn = frame
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
		case msg := <-messages:
			if _, quit := msg.(tea.QuitMsg); quit {
				return nil
			}
			var cmd tea.Cmd
			model, cmd = model.Update(msg)
			run(cmd)
		}
	}
}

// drawFrame paints frame from the top left corner, clearing what is left
// of each line and everything below it. The terminal is in raw mode, so a
// line ends with a carriage return as well.
func drawFrame(terminal io.Writer, frame string) error {
	var b strings.Builder
	b.WriteString("\x1b[H")
	b.WriteString(strings.ReplaceAll(frame, "\n", "\x1b[K\r\n"))
	b.WriteString("\x1b[K\x1b[J")
	_, err := io.WriteString(terminal, b.String())
	return err
}

// readKeys sends the keys typed on input until it fails or send refuses.
func readKeys(input io.Reader, send func(tea.Msg) bool) {
	buffer := make([]byte, 256)
	for {
		n, err := input.Read(buffer)
		for _, key := range decodeKeys(buffer[:n]) {
			if !send(key) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// decodeKeys turns what one read of a terminal returned into key presses.
// An escape alone is the Esc key; an escape that starts a sequence (arrows,
// function keys, Alt with a key) is skipped, as the screen binds none.
func decodeKeys(data []byte) []tea.KeyPressMsg {
	var keys []tea.KeyPressMsg
	for i := 0; i < len(data); {
		b := data[i]
		switch {
		case b == 0x1b && i+1 == len(data):
			keys = append(keys, tea.KeyPressMsg{Code: tea.KeyEscape})
			i++
		case b == 0x1b:
			i = skipSequence(data, i)
		case b == '\r' || b == '\n':
			keys = append(keys, tea.KeyPressMsg{Code: tea.KeyEnter})
			i++
		case b == 0x7f || b == 0x08:
			keys = append(keys, tea.KeyPressMsg{Code: tea.KeyBackspace})
			i++
		case b == 0x03:
			keys = append(keys, tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
			i++
		case b == ' ':
			keys = append(keys, tea.KeyPressMsg{Code: tea.KeySpace, Text: " "})
			i++
		case b < 0x20:
			i++ // another control key: none is bound
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r != utf8.RuneError {
				keys = append(keys, tea.KeyPressMsg{Code: r, Text: string(r)})
			}
			i += size
		}
	}
	return keys
}

// skipSequence returns the index just past the escape sequence that starts
// at data[start]: CSI (ESC [ ... final byte), SS3 (ESC O and one byte), OSC
// (ESC ] ... BEL or ESC \), or ESC and one character.
func skipSequence(data []byte, start int) int {
	i := start + 1
	switch data[i] {
	case '[':
		for i++; i < len(data) && (data[i] < 0x40 || data[i] > 0x7e); i++ {
		}
		return min(i+1, len(data))
	case 'O':
		return min(i+2, len(data))
	case ']':
		for i++; i < len(data); i++ {
			if data[i] == 0x07 {
				return i + 1
			}
			if data[i] == 0x1b && i+1 < len(data) && data[i+1] == '\\' {
				return i + 2
			}
		}
		return len(data)
	default:
		_, size := utf8.DecodeRune(data[i:])
		return i + size
	}
}
