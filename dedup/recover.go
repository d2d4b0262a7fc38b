package dedup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ironbus/ironbus/segment/vfs"
)

// load reads the sealed generations in w.dir. A file that fails its
// checks is deleted and its ids counted as forgotten early; a temporary
// file a crash left is deleted; generations that expired go, and the
// count cap applies. Only a directory that cannot be listed fails.
func (w *Window) load() error {
	names, err := w.fs.List(w.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dedup: listing %s: %w", w.dir, err)
	}
	end := w.opts.Durable(context.Background(), 0)
	now := w.opts.Now()
	removed := false
	for _, name := range names {
		file := path.Join(w.dir, name)
		seq, ok := parseRunName(name)
		if !ok {
			if strings.HasSuffix(name, tempFileSuffix) {
				removed = w.fs.Remove(file) == nil || removed
			}
			continue
		}
		w.nextSeq = max(w.nextSeq, seq+1)
		g, err := w.loadGeneration(file, end, now)
		if err != nil {
			w.logger.Error("a damaged message-id generation was dropped; the ids it held may be stored again", "file", file, "error", err.Error())
			removed = w.fs.Remove(file) == nil || removed
			continue
		}
		w.gens = append(w.gens, g)
		w.onDisk += g.header.count
		w.coversUpTo = max(w.coversUpTo, g.header.coversUpTo)
	}
	if removed {
		if err := w.fs.SyncDir(w.dir); err != nil {
			return fmt.Errorf("dedup: %s: %w", w.dir, err)
		}
	}
	slices.SortFunc(w.gens, func(a, b *generation) int { return compare(a.header.seq, b.header.seq) })
	// Recovery may have cut the log below what the files cover: the log
	// from its end on is new, and ids found there are replayed.
	w.coversUpTo = min(w.coversUpTo, end)
	w.retireExpired()
	w.trim()
	return nil
}

// loadGeneration reads and checks one generation file.
func (w *Window) loadGeneration(file string, end uint64, now time.Duration) (*generation, error) {
	image, err := vfs.ReadFile(w.fs, file)
	if err != nil {
		return nil, err
	}
	run, err := decodeRun(image)
	if err != nil {
		if header, herr := decodeRunHeader(image); herr == nil {
			w.evictedEarly.Add(uint64(header.count))
		}
		return nil, err
	}
	g := &generation{file: file, decodedRun: run, limit: end, clamp: math.MaxInt64}
	if run.header.maxTime > now {
		g.clamp = now
	}
	return g, nil
}

// parseRunName returns the sequence number of a generation file name.
func parseRunName(name string) (uint64, bool) {
	hex, ok := strings.CutPrefix(name, runFilePrefix)
	if !ok {
		return 0, false
	}
	hex, ok = strings.CutSuffix(hex, runFileSuffix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	return seq, err == nil
}

func compare(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
