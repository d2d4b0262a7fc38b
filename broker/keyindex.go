package broker

import (
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/ironbus/ironbus/keyindex"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
)

// Subject indexes (package keyindex): every partition keeps, beside its
// segments in keyindex/, the offset of the last record of each subject,
// for "expect last subject offset" appends. The index is derived from the
// log: opened with the stream and its tail replayed from the log, fed by
// the append path (Put under checkMu), written behind the log's committed
// mark by one flusher goroutine per broker, closed with the stream.
//
// Semantics kept across the log's history:
//   - Retention removing a subject's last record does not forget it: the
//     index still answers that offset, the subject's place in the log's
//     history, so "none" never matches a subject that had records.
//   - A purge keeps the last offsets too. Offsets are never reused, so a
//     writer expecting offset N still meets N, and two writers creating
//     "the first record of subject S" after a purge cannot both win (the
//     create-after-purge race of routing-richness §5.2). A user who wants
//     a fresh start removes the stream; the recreated stream starts with
//     an empty index.
//   - A rebuild (a missing or damaged index, a restore from a backup,
//     which does not carry the index) covers the retained records only.

const (
	// subjectFlushInterval is how often the flusher writes each index.
	subjectFlushInterval = time.Second
	// subjectFlushRetry is how soon it comes back while an index waits for
	// its log's next sync.
	subjectFlushRetry = 10 * time.Millisecond
	// A new index starts at one page (16 KiB on disk, counted in the disk
	// budget) and doubles as subjects arrive, up to a million subjects
	// (86 MiB): disk grows with the subjects a partition has, not with
	// configuration.
	subjectIndexCapacity    = 95
	subjectIndexMaxCapacity = 1 << 20
	// subjectIndexOverlay and subjectIndexDroppedBits bound each
	// partition's in-memory updates (keyindex.MemoryBound): 2 × 256 ×
	// 110 B + 256 × 32 B + 1 KiB + 40 KiB ≈ 105 KiB per log at most,
	// counted in the RAM budget (memory.go). A full overlay is flushed
	// (or answers a retryable busy), so a smaller one costs flushes, not
	// answers.
	subjectIndexOverlay     = 256
	subjectIndexDroppedBits = 8 << 10
)

// subjectIndexOptions are the options of every partition's index but
// those tied to the partition.
func subjectIndexOptions() keyindex.Options {
	return keyindex.Options{Capacity: subjectIndexCapacity, MaxCapacity: subjectIndexMaxCapacity,
		Overlay: subjectIndexOverlay, DroppedBits: subjectIndexDroppedBits}
}

// subjectIndexState is the broker's side of the subject indexes.
type subjectIndexState struct {
	due     chan struct{} // an index's overlay filled
	flushed chan struct{} // closed when the flusher has stopped
}

// openSubjectIndex opens p's subject index and replays its log from where
// the index's file stops covering it. A failure is logged and leaves
// p.subjects nil: the partition then serves everything but conditional
// subject appends. A log that opened frozen takes no appends and gets no
// index: its directory is left exactly as found (a newer format, a loss
// above the caps, waiting for `ironbus repair`).
func (b *Broker) openSubjectIndex(p *Partition) {
	// A replicated partition's log is written by its replica: an index
	// kept beside it by this node's appends would miss the records other
	// leaders stored (subject expectations are refused there).
	if p.log == nil || b.cfg.Storage.ReadOnly || p.log.Err() != nil || p.replicated {
		return
	}
	logName := fmt.Sprintf("%s/%d", p.stream, p.index)
	end := p.log.Committed()
	opts := subjectIndexOptions()
	opts.LogEnd, opts.ReadLog, opts.FlushDue = end, p.readSubjects, b.nudgeSubjectIndexes
	index, err := keyindex.Open(b.cfg.FS, path.Join(p.log.Path(), segment.KeyIndexDirName), opts)
	if err != nil {
		b.cfg.Logger.Error("subject index did not open; conditional subject appends are refused on this partition",
			"log", logName, "error", err.Error())
		return
	}
	if reason := index.Rebuilt(); reason != "" && end > 0 {
		b.cfg.Logger.Info("subject index rebuilt from the log", "log", logName, "reason", reason)
	}
	from := index.CoversUpTo()
	if first := p.log.FirstOffset(); from < first {
		b.cfg.Logger.Warn("the log dropped records the subject index did not cover; subjects last written there answer an older offset or none",
			"log", logName, "covered", from, "first", first)
	}
	err = p.readSubjects(from, end, index.Replay)
	if err == nil {
		index.Durable(end)
		err = index.Flush()
	}
	if err != nil {
		_ = index.Close()
		b.cfg.Logger.Error("subject index did not replay the log; conditional subject appends are refused on this partition",
			"log", logName, "error", err.Error())
		return
	}
	p.subjects = index
}

// indexSubjects tells p's subject index about a batch just staged at
// offsets first, first+1, …: each record's subject as its body carries it
// (record.Subject), which is what a replay from the log reads back, so the
// two always agree. Records without a subject are skipped. REQUIRES:
// checkMu held, the batch staged under it (Put's order is offset order).
func (p *Partition) indexSubjects(bodies [][]byte, first uint64) {
	if p.subjects == nil {
		return
	}
	for n, body := range bodies {
		if subject, ok := record.Subject(body); ok && len(subject) > 0 {
			p.subjects.Put(subject, first+uint64(n))
		}
	}
}

// lastSubjectOffset is the offset of the last record of subject in p, for
// an "expect last subject offset" append: found is false when p has none.
// The index may name a record not yet durable (it counts every record
// assigned). Errors carry an engine kind: ErrBusy in a RetryableError
// when the index cannot be sure yet (keyindex.ErrFull), ErrStorage when
// it did not open or failed. REQUIRES: checkMu held.
func (p *Partition) lastSubjectOffset(subject []byte) (offset uint64, found bool, err error) {
	if p.subjects == nil {
		return 0, false, fmt.Errorf("%w: the subject index of %s/%d did not open (see the broker log); conditional subject appends are refused",
			ErrStorage, p.stream, p.index)
	}
	offset, found, err = p.subjects.Last(subject)
	switch {
	case err == nil:
		return offset, found, nil
	case errors.Is(err, keyindex.ErrFull):
		return 0, false, &RetryableError{Err: fmt.Errorf("%w: %s/%d: %w", ErrBusy, p.stream, p.index, err), RetryAfter: subjectFlushInterval}
	}
	return 0, false, fmt.Errorf("%w: %s/%d: %w", ErrStorage, p.stream, p.index, err)
}

// readSubjects reads the committed records of p's log in [from, to) and
// calls visit with the subject of each that has one (keyindex's ReadLog).
func (p *Partition) readSubjects(from, to uint64, visit func(subject []byte, offset uint64)) error {
	reader := p.log.NewReader(from)
	defer reader.Close()
	for {
		entry, err := reader.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if entry.Gap != nil {
			if entry.Gap.To >= to {
				return nil
			}
			continue
		}
		if entry.Offset >= to {
			return nil
		}
		if subject, ok := record.Subject(entry.Body); ok && len(subject) > 0 {
			visit(subject, entry.Offset)
		}
	}
}

// syncSubjectIndex tells p's index how far its log is durable and writes
// it. The committed mark is read under checkMu: every record below it has
// been staged and Put, as keyindex.Index.Durable requires.
func (p *Partition) syncSubjectIndex() error {
	p.checkMu.Lock()
	end := p.log.Committed()
	p.checkMu.Unlock()
	p.subjects.Durable(end)
	return p.subjects.Flush()
}

// nudgeSubjectIndexes asks the flusher for a pass; never blocks (Put calls
// it on the append path).
func (b *Broker) nudgeSubjectIndexes() {
	select {
	case b.subjectIndexes.due <- struct{}{}:
	default:
	}
}

// startSubjectFlusher starts the goroutine that writes every subject
// index behind its log's committed mark.
func (b *Broker) startSubjectFlusher() {
	b.subjectIndexes.due = make(chan struct{}, 1)
	b.subjectIndexes.flushed = make(chan struct{})
	go b.flushSubjectIndexes()
}

func (b *Broker) flushSubjectIndexes() {
	defer close(b.subjectIndexes.flushed)
	ticker := time.NewTicker(subjectFlushInterval)
	defer ticker.Stop()
	retry := time.NewTimer(subjectFlushRetry)
	retry.Stop()
	failing := map[*keyindex.Index]bool{} // logged once each
	for {
		select {
		case <-b.stop:
			return
		case <-ticker.C:
		case <-b.subjectIndexes.due:
		case <-retry.C:
		}
		pending := false
		for _, p := range b.indexedPartitions() {
			err := p.syncSubjectIndex()
			switch {
			case err == nil:
				delete(failing, p.subjects)
			case errors.Is(err, keyindex.ErrClosed):
			case !failing[p.subjects]:
				failing[p.subjects] = true
				b.cfg.Logger.Warn("subject index flush failed", "log", fmt.Sprintf("%s/%d", p.stream, p.index), "error", err.Error())
			}
			pending = pending || p.subjects.Pending()
		}
		if pending {
			retry.Reset(subjectFlushRetry)
		}
	}
}

// indexedPartitions lists the served partitions that have a subject index.
func (b *Broker) indexedPartitions() []*Partition {
	b.logsMu.RLock()
	defer b.logsMu.RUnlock()
	var out []*Partition
	for _, s := range b.streams {
		for i := range s.partitions {
			if s.partitions[i].subjects != nil {
				out = append(out, &s.partitions[i])
			}
		}
	}
	return out
}

// closeSubjectIndexes writes and closes the subject indexes of a stream's
// partitions (its removal, the broker's Close).
func (b *Broker) closeSubjectIndexes(s *Stream) {
	for i := range s.partitions {
		p := &s.partitions[i]
		if p.subjects == nil {
			continue
		}
		p.checkMu.Lock()
		end := p.log.Committed()
		p.checkMu.Unlock()
		p.subjects.Durable(end)
		if err := p.subjects.Close(); err != nil {
			b.cfg.Logger.Warn("subject index did not close cleanly; the next open replays the log", "log", fmt.Sprintf("%s/%d", p.stream, p.index), "error", err.Error())
		}
	}
}

// stopSubjectIndexes stops the flusher and closes every index.
// REQUIRES: b.stop closed.
func (b *Broker) stopSubjectIndexes() {
	if b.subjectIndexes.flushed != nil {
		<-b.subjectIndexes.flushed
	}
	b.logsMu.RLock()
	defer b.logsMu.RUnlock()
	for _, s := range b.streams {
		b.closeSubjectIndexes(s)
	}
}

// flushSubjectIndexOf writes p's subject index up to its committed mark:
// before a purge or retention deletes records, so the index covers them
// first. A
// failure is logged, not returned: an index that cannot write refuses to
// answer, so the purge itself is safe.
func (b *Broker) flushSubjectIndexOf(p *Partition) {
	if p.subjects == nil {
		return
	}
	if err := p.syncSubjectIndex(); err != nil {
		b.cfg.Logger.Warn("subject index flush before records are deleted failed", "log", fmt.Sprintf("%s/%d", p.stream, p.index), "error", err.Error())
	}
}

// coverBeforeDelete writes a stream partition's subject index when it does
// not yet cover the records a retention pass is about to delete (below
// end): the replay after a crash must find in the log every record the
// index does not cover. REQUIRES: passMu held (logsMu comes after it).
func (b *Broker) coverBeforeDelete(ref logRef, end uint64) {
	if ref.deadLetters {
		return
	}
	served, ok := b.existingStream(ref.stream)
	if !ok || ref.partition >= uint32(len(served.partitions)) {
		return
	}
	p := &served.partitions[ref.partition]
	if p.subjects != nil && p.subjects.CoversUpTo() < end {
		b.flushSubjectIndexOf(p)
	}
}
