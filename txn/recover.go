package txn

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"

	"github.com/ironbus/ironbus/segment"
	"github.com/ironbus/ironbus/segment/vfs"
)

// ended is the outcome of an ended transaction, kept to answer a repeated
// end.
type ended struct {
	identity string
	outcome  Outcome
}

// endedSet keeps the outcomes of the transactions that ended last: at
// most limit of them and maxRanges ranges in all, the oldest going
// first.
type endedSet struct {
	limit     int
	maxRanges int
	byID      map[uint64]ended
	order     []uint64 // oldest first, from head on
	head      int
	ranges    int
}

func newEndedSet(limit, maxRanges int) endedSet {
	return endedSet{limit: limit, maxRanges: maxRanges, byID: map[uint64]ended{}}
}

func (s *endedSet) add(id uint64, identity string, outcome Outcome) {
	if old, ok := s.byID[id]; ok {
		s.ranges -= len(old.outcome.Ranges)
	} else {
		s.order = append(s.order, id)
	}
	s.byID[id] = ended{identity: identity, outcome: outcome}
	s.ranges += len(outcome.Ranges)
	for len(s.order)-s.head > s.limit || (s.ranges > s.maxRanges && len(s.order)-s.head > 1) {
		oldest := s.order[s.head]
		s.head++
		s.ranges -= len(s.byID[oldest].outcome.Ranges)
		delete(s.byID, oldest)
	}
	if s.head > len(s.order)/2 {
		s.order = append(s.order[:0], s.order[s.head:]...)
		s.head = 0
	}
}

func (s *endedSet) get(id uint64) (ended, bool) {
	e, ok := s.byID[id]
	return e, ok
}

// scanLog calls fn with every coordinator record from offset from to the
// durable end. A record that does not decode is skipped and logged: its
// CRC held, so it is from a newer binary or a bug, and skipping it can
// only abort a transaction, never invent one.
func (c *Coordinator) scanLog(from uint64, fn func(offset uint64, e entry)) error {
	r := c.log.NewReader(max(from, c.log.FirstOffset()))
	defer r.Close()
	end := c.log.Committed()
	for {
		item, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("txn: coordinator log: %w", err)
		}
		if item.Gap != nil {
			continue
		}
		if item.Offset >= end {
			return nil
		}
		e, err := decodeEntry(item.Body)
		if err != nil {
			c.cfg.Logger.Warn("coordinator record skipped", "offset", item.Offset, "error", err.Error())
			continue
		}
		if e.kind == kindBegin {
			e.id = item.Offset + 1
		}
		fn(item.Offset, e)
	}
}

// replayed is a transaction as the log tells it.
type replayed struct {
	identity string
	first    uint64
	records  uint32
	bytes    int64
	intent   *entry
}

// replay reads the whole log: the transactions it leaves without an end,
// and the ended ones into c.ended (the last MaxEnded of them).
func (c *Coordinator) replay() (map[uint64]*replayed, error) {
	pending := map[uint64]*replayed{}
	err := c.scanLog(0, func(offset uint64, e entry) {
		switch e.kind {
		case kindBegin:
			pending[e.id] = &replayed{identity: e.identity, first: offset}
		case kindRecord:
			if t := pending[e.id]; t != nil {
				t.records++
				t.bytes += int64(len(e.body))
			}
		case kindIntent:
			if t := pending[e.id]; t != nil {
				intent := e
				t.intent = &intent
			}
		case kindCommitted, kindAborted:
			identity := ""
			if t := pending[e.id]; t != nil {
				identity = t.identity
			}
			delete(pending, e.id)
			c.ended.add(e.id, identity, Outcome{Committed: e.kind == kindCommitted, Ranges: e.ranges, Reason: e.reason})
		}
	})
	return pending, err
}

// recover ends every transaction the log leaves open: rolled forward when
// its commit intent is durable, aborted otherwise.
func (c *Coordinator) recover() error {
	pending, err := c.replay()
	if err != nil {
		return err
	}
	ids := make([]uint64, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	aborted := 0
	for _, id := range ids {
		t := pending[id]
		if t.intent == nil {
			// Not written (a full staging buffer) is harmless: the next
			// start aborts it again.
			_, _ = c.stage(encodeAborted(id, ReasonRestart))
			c.ended.add(id, t.identity, Outcome{Reason: ReasonRestart})
			aborted++
			continue
		}
		open := &openTxn{id: id, identity: t.identity, first: t.first, records: t.records, bytes: t.bytes, intent: t.intent, committing: true}
		c.open[id] = open
		if _, err := c.finish(open, nil); err != nil {
			// The broker starts anyway (I3): the sweeper retries, and a
			// repeated commit from its owner's identity tries again.
			c.cfg.Logger.Error("committed transaction not rolled forward at recovery; retrying", "txn", id, "error", err.Error())
			continue
		}
		c.cfg.Logger.Info("transaction rolled forward at recovery", "txn", id)
	}
	if aborted > 0 {
		c.cfg.Logger.Info("transactions left open by the last run aborted", "count", aborted)
	}
	return nil
}

// Inspect lists the transactions a data directory's coordinator log
// leaves open, reading it offline (read-only, under a shared lock: never
// while a broker serves the directory). dir is <data-dir>/txn; a missing
// directory has none. The next broker start ends them all: it rolls
// forward those marked Committing and aborts the others.
func Inspect(fsys vfs.FS, dir string, storage segment.Options) ([]Info, error) {
	if fsys == nil {
		fsys = vfs.OS{}
	}
	if _, err := fsys.Stat(dir); err != nil {
		return nil, nil
	}
	storage.ReadOnly = true
	d, err := segment.Open(fsys, dir, storage)
	if err != nil {
		return nil, fmt.Errorf("txn: coordinator directory: %w", err)
	}
	defer func() { _ = d.Close() }()
	l, err := d.OpenLog(segment.LogID{Stream: coordinatorLogName})
	if err != nil {
		return nil, fmt.Errorf("txn: coordinator log: %w", err)
	}
	c := &Coordinator{cfg: Config{Logger: slog.New(slog.DiscardHandler)}, log: l, ended: newEndedSet(1, 0)}
	pending, err := c.replay()
	if err != nil {
		return nil, err
	}
	infos := make([]Info, 0, len(pending))
	for id, t := range pending {
		infos = append(infos, Info{ID: id, Identity: t.identity, Records: t.records, Bytes: t.bytes, Committing: t.intent != nil})
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].ID < infos[j].ID })
	return infos, nil
}
