package topview

import (
	"context"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/ironbus/ironbus/broker/health"
	"github.com/ironbus/ironbus/monitor"
)

// Fetcher takes one snapshot: an /admin request to a live broker, or a
// read of a data directory offline. It must honour the context.
type Fetcher func(ctx context.Context) (*health.Admin, error)

// Config is what the command hands the model.
type Config struct {
	Fetch    Fetcher
	Source   string
	Interval time.Duration
	// Manual turns the periodic refresh off: the model fetches once, then
	// again only on the `g` key (offline, where each read takes the
	// directory's lock).
	Manual bool
	// Offline says the snapshots come from a data directory.
	Offline bool
	// Timeout bounds one fetch (a hung broker must not freeze the screen).
	Timeout time.Duration
	// Note, when set, gives the line shown under the header (offline: what
	// the latest read could see). It is called while rendering, so it
	// must be safe to call beside a running Fetch.
	Note func() string
	// Now is the clock; the monotonic reading is what rates use.
	Now     func() time.Time
	Options TableOptions
}

// Model is the bubbletea model of `ironbus top`.
type Model struct {
	config        Config
	current       monitor.Sample
	history       monitor.History
	err           error
	options       TableOptions
	editingFilter bool
	help          bool
	width, height int
}

// snapshotMsg carries one fetch's outcome back into Update.
type snapshotMsg struct {
	sample monitor.Sample
	err    error
}

// tickMsg asks for the next fetch.
type tickMsg struct{}

// NewModel returns the model for config; a missing clock is time.Now.
func NewModel(config Config) Model {
	if config.Now == nil {
		config.Now = time.Now
	}
	if config.Interval <= 0 {
		config.Interval = time.Second
	}
	if config.Timeout <= 0 {
		config.Timeout = max(config.Interval, 5*time.Second)
	}
	return Model{config: config, options: config.Options}
}

// Init takes the first snapshot at once.
func (m Model) Init() tea.Cmd { return m.fetch() }

func (m Model) fetch() tea.Cmd {
	config := m.config
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), config.Timeout)
		defer cancel()
		doc, err := config.Fetch(ctx)
		return snapshotMsg{sample: monitor.Sample{At: config.Now(), Admin: doc}, err: err}
	}
}

// Update folds a snapshot, a tick, a key or a resize into the model.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case snapshotMsg:
		m = m.withSnapshot(msg)
		if m.config.Manual {
			return m, nil
		}
		return m, tea.Tick(m.config.Interval, func(time.Time) tea.Msg { return tickMsg{} })
	case tickMsg:
		return m, m.fetch()
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.KeyPressMsg:
		return m.withKey(msg)
	}
	return m, nil
}

// withSnapshot keeps the last good snapshot on a failure, so the screen
// says "stale" rather than going blank while the broker restarts.
func (m Model) withSnapshot(msg snapshotMsg) Model {
	if msg.err != nil || msg.sample.Admin == nil {
		m.err = msg.err
		return m
	}
	m.err = nil
	if rates, ok := monitor.ComputeRates(m.current, msg.sample); ok {
		m.history.Add(rates)
	}
	m.current = msg.sample
	return m
}

func (m Model) withKey(key tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if key.String() == "ctrl+c" {
		return m, tea.Quit
	}
	if m.editingFilter {
		return m.withFilterKey(key), nil
	}
	switch key.String() {
	case "q", "esc":
		return m, tea.Quit
	case "s":
		m.options.Sort = m.options.Sort.Next()
	case "r":
		m.options.Reverse = !m.options.Reverse
	case "/":
		m.editingFilter = true
	case "?":
		m.help = !m.help
	case "g":
		if m.config.Manual {
			return m, m.fetch()
		}
	}
	return m, nil
}

func (m Model) withFilterKey(key tea.KeyPressMsg) Model {
	switch key.String() {
	case "enter":
		m.editingFilter = false
	case "esc":
		m.editingFilter, m.options.Filter = false, ""
	case "backspace":
		if runes := []rune(m.options.Filter); len(runes) > 0 {
			m.options.Filter = string(runes[:len(runes)-1])
		}
	default:
		if text := key.Key().Text; text != "" && len([]rune(m.options.Filter)) < maxFilterRunes {
			m.options.Filter += text
		}
	}
	return m
}

// maxFilterRunes bounds the filter a held key can type.
const maxFilterRunes = 64

// Screen is the frame the model shows now.
func (m Model) Screen() Screen {
	return Screen{Source: m.config.Source, Admin: m.current.Admin, History: &m.history, Interval: m.config.Interval, Manual: m.config.Manual,
		Offline: m.config.Offline, Options: m.options, Err: m.err, Note: m.note(), EditingFilter: m.editingFilter, Help: m.help,
		Width: m.width, Height: m.height}
}

func (m Model) note() string {
	if m.config.Note == nil {
		return ""
	}
	return m.config.Note()
}

// View renders the frame on the alternate screen, so quitting gives the
// terminal back as it was.
func (m Model) View() tea.View {
	view := tea.NewView(Render(m.Screen()))
	view.AltScreen = true
	view.WindowTitle = "ironbus top"
	return view
}
