package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// byteProgress draws a one-line progress bar for long file operations
// (backup, restore, scrub) on stderr, only when stderr is a terminal and
// the output is not --json: a log file or a pipe gets no control codes.
type byteProgress struct {
	w       io.Writer
	label   string
	enabled bool

	mu    sync.Mutex
	drawn time.Time
}

// progressRedraw keeps redraws cheap on a slow serial console.
const progressRedraw = 200 * time.Millisecond

func newByteProgress(opts *globalOptions, label string) *byteProgress {
	p := &byteProgress{w: opts.stderr, label: label}
	if file, ok := opts.stderr.(*os.File); ok && !opts.json {
		info, err := file.Stat()
		p.enabled = err == nil && info.Mode()&os.ModeCharDevice != 0
	}
	return p
}

// update is the callback handed to package backup.
func (p *byteProgress) update(done, total int64) {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.drawn) < progressRedraw && done < total {
		return
	}
	p.drawn = now
	const width = 30
	filled := width
	percent := 100
	if total > 0 {
		filled = int(min(done, total) * width / total)
		percent = int(min(done, total) * 100 / total)
	}
	fmt.Fprintf(p.w, "\r\033[K%s [%s%s] %3d%% %s of %s", p.label, strings.Repeat("#", filled),
		strings.Repeat("-", width-filled), percent, formatBytes(done), formatBytes(total))
}

// finish clears the bar so the report starts on a clean line.
func (p *byteProgress) finish() {
	if p.enabled {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	value, suffix := float64(n), []string{"KiB", "MiB", "GiB", "TiB"}
	i := -1
	for value >= unit && i < len(suffix)-1 {
		value /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", value, suffix[i])
}
