package sim

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/ironbus/ironbus/internal/histcheck"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/replica"
)

// linearizableTimeout bounds porcupine's search; the model is cheap, so a
// run that needs more is a finding in itself.
const linearizableTimeout = 60 * time.Second

// applied checks one entry a replica applied against the committed log:
// the first replica to apply an index defines it, every later one must
// apply the same bytes. A new data entry must continue the offsets.
func (c *cluster) applied(n *node, e replica.Entry) {
	c.traceEvent(traceApply, uint64(n.id), e.Index, e.Term)
	switch {
	case e.Index <= uint64(len(c.committed)):
		if want := c.committed[e.Index-1]; !sameEntry(want, e) {
			c.violation("node %d.%d applied index %d term %d (%d bytes), the group committed term %d (%d bytes) there",
				n.number, n.incarnation, e.Index, e.Term, len(e.Data), want.Term, len(want.Data))
		}
		return
	case e.Index > uint64(len(c.committed))+1:
		c.violation("node %d applied index %d, the committed log ends at %d", n.number, e.Index, len(c.committed))
		return
	}
	e.Data = bytes.Clone(e.Data)
	c.committed = append(c.committed, e)
	if e.Type != replica.EntryNormal {
		return
	}
	records, err := decodeRecords(e)
	if err != nil {
		c.violation("committed entry %d does not decode: %v", e.Index, err)
		return
	}
	for _, r := range records {
		if r.Offset != c.nextOffset {
			c.violation("committed entry %d holds offset %d where the log continues at %d", e.Index, r.Offset,
				c.nextOffset)
		}
		c.nextOffset = r.Offset + 1
	}
	c.records = append(c.records, records...)
}

func sameEntry(a, b replica.Entry) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type && bytes.Equal(a.Data, b.Data)
}

// decodeRecords decodes a normal entry's records: its payload header, then
// each frame checked by its CRCs, whose offsets must run from the header's
// base offset.
func decodeRecords(e replica.Entry) ([]histcheck.Record, error) {
	payload, err := replica.DecodePayload(e.Data)
	if err != nil || payload.Kind != replica.PayloadData {
		return nil, err
	}
	var records []histcheck.Record
	frames := payload.Frames
	for len(frames) > 0 {
		h, body, err := record.ParseFrame(frames, record.DefaultMaxBody)
		if err != nil {
			return nil, fmt.Errorf("entry %d, frame %d: %w", e.Index, len(records), err)
		}
		if want := payload.Data.BaseOffset + uint64(len(records)); h.Offset != want {
			return nil, fmt.Errorf("entry %d, frame %d is at offset %d, its header says %d", e.Index,
				len(records), h.Offset, want)
		}
		records = append(records, histcheck.Record{Offset: h.Offset, Value: string(body)})
		frames = frames[h.FrameLength:]
	}
	if len(records) != int(payload.Data.Count) {
		return nil, fmt.Errorf("entry %d holds %d frames, its header says %d", e.Index, len(records),
			payload.Data.Count)
	}
	return records, nil
}

// checkNodes runs the per-tick checks: terms never go back within a
// process lifetime (nor below the durable term after a restart), one
// leader per term, stopped replicas noticed, and every journal agrees
// with the committed log below its commit index.
func (c *cluster) checkNodes() {
	for _, n := range c.nodes {
		if n.replica == nil {
			continue
		}
		s := n.replica.Status()
		if s.Term < n.maxTerm {
			c.violation("node %d's term went back from %d to %d", n.number, n.maxTerm, s.Term)
		}
		n.maxTerm = max(n.maxTerm, s.Term)
		if s.Latched != nil || s.Damaged != nil {
			c.stopped(n, errors.Join(s.Latched, s.Damaged))
		} else if s.Role == replica.RoleLeader {
			if other, ok := c.leaders[s.Term]; ok && other != n.id {
				c.violation("two leaders in term %d: node %d.%d and node %d.%d", s.Term, other.Node(),
					other.Incarnation(), n.number, n.incarnation)
			}
			if _, seen := c.leaders[s.Term]; !seen && len(n.disk.corrupted) > 0 {
				// Damage is found when the entry is read; until then the
				// replica may lead, and must stop when it reads it.
				c.faults["led with undetected damage"]++
			}
			c.leaders[s.Term] = n.id
			c.noteConfig(s.Config)
		}
		c.verifyJournal(n, s.Commit)
	}
}

// verifyJournal holds the node's journal, from where it was last checked
// up to its commit index, against the committed log, byte for byte. The
// entries it was told to damage are skipped.
func (c *cluster) verifyJournal(n *node, commit uint64) {
	to := min(commit, n.disk.LastIndex(), uint64(len(c.committed)))
	from := max(n.verifiedTo+1, n.disk.FirstIndex())
	for index := from; index <= to; {
		if n.disk.corrupted[index] {
			index++
			continue
		}
		hi := to + 1
		if len(n.disk.corrupted) > 0 {
			hi = index + 1
		}
		entries, err := n.disk.Entries(index, hi, ^uint64(0))
		if err != nil {
			c.violation("node %d cannot read committed entries [%d, %d): %v", n.number, index, hi, err)
			return
		}
		for _, e := range entries {
			if want := c.committed[e.Index-1]; !sameEntry(want, e) {
				c.violation("node %d.%d holds index %d term %d below its commit %d, the group committed term %d there",
					n.number, n.incarnation, e.Index, e.Term, commit, want.Term)
				return
			}
		}
		index += uint64(len(entries))
	}
	n.verifiedTo = max(n.verifiedTo, to)
}

// finalChecks runs when the group has converged: every journal agrees
// with the committed log to its end, and the history passes both
// checkers against the committed log's records.
func (c *cluster) finalChecks() {
	for _, n := range c.nodes {
		s := n.replica.Status()
		if s.Commit != uint64(len(c.committed)) {
			c.violation("node %d ends at commit %d, the committed log at %d", n.number, s.Commit, len(c.committed))
		}
		c.verifyJournal(n, s.Commit)
	}
	if c.failure != "" {
		return
	}
	h := histcheck.History{Operations: c.history.Operations(),
		Partitions: map[uint32]histcheck.Partition{0: {Final: c.records}}}
	if err := histcheck.CheckLog(h); err != nil {
		c.violation("history: %v", err)
		return
	}
	if err := histcheck.CheckLinearizable(h, linearizableTimeout); err != nil {
		c.violation("history: %v", err)
	}
}
