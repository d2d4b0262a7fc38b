package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/replica"
)

// client is a producer: it sends records to the node it believes leads,
// follows NotLeader answers, and records every invocation and outcome.
type client struct {
	number  int
	hint    uint32 // node number believed to lead (0: unknown)
	waiting *inflight
	nextAt  int64
}

type inflight struct {
	node     *node
	replica  *replica.Replica
	proposal *replica.Proposal
	ids      []int
	values   []string
	control  []byte // a control proposal's body (no records)
	deadline int64
}

// controlKind is the kind of the control entries clients propose: consumer
// state in a broker, opaque here; they own no offsets.
const controlKind = 7

// readerClient numbers the reads in the history.
const readerClient = 1000

func (c *cluster) clientsBusy() bool {
	return slices.ContainsFunc(c.clients, func(cl *client) bool { return cl.waiting != nil })
}

func (c *cluster) clientsStep() {
	for _, cl := range c.clients {
		switch {
		case cl.waiting != nil && c.now >= cl.waiting.deadline:
			c.finish(cl, replica.ErrIndeterminate)
		case cl.waiting == nil && !c.clientsStopped && c.now >= cl.nextAt:
			c.produce(cl)
		}
	}
}

// produce sends 1-3 records, each with a value no other record carries,
// or now and then a control entry.
func (c *cluster) produce(cl *client) {
	target := cl.hint
	if target == 0 {
		target = uint32(1 + c.rng.IntN(len(c.nodes)))
	}
	n := c.nodes[target-1]
	if c.rng.IntN(8) == 0 {
		c.proposeControl(cl, n)
		return
	}
	count := 1 + c.rng.IntN(3)
	ids := make([]int, count)
	values := make([]string, count)
	records := make([]replica.Record, count)
	for i := range records {
		c.values++
		value := fmt.Sprintf("s%d-c%d-v%d", c.config.Seed, cl.number, c.values)
		ids[i], values[i] = c.history.Produce(cl.number, 0, value, c.now), value
		records[i] = replica.Record{Body: []byte(value), BodyCRC: record.Checksum([]byte(value)),
			Timestamp: c.now * StepMillis}
	}
	if n.replica == nil {
		c.refused(cl, ids, 0) // connection refused: nothing was sent
		return
	}
	var p *replica.Proposal
	var err error
	if c.call(n, func() { p, err = n.replica.ProposeRecords(records) }) {
		for _, id := range ids {
			c.history.Indeterminate(id, c.now) // the connection broke
		}
		c.indeterminate += len(ids)
		cl.hint, cl.nextAt = 0, c.now+1+c.rng.Int64N(20)
		return
	}
	var notLeader *replica.NotLeaderError
	switch {
	case errors.As(err, &notLeader):
		c.refused(cl, ids, notLeader.Leader.Node())
	case err != nil:
		c.refused(cl, ids, 0)
	case p.Count != uint32(count):
		c.violation("a proposal of %d records covers %d offsets", count, p.Count)
	default:
		c.event("client %d proposes %d records on node %d: index %d term %d offset %d", cl.number, count,
			n.number, p.Index, p.Term, p.BaseOffset)
		cl.waiting = &inflight{node: n, replica: n.replica, proposal: p, ids: ids, values: values,
			deadline: c.now + clientTimeout}
	}
	c.process(n)
}

// proposeControl proposes a control entry with a unique body.
func (c *cluster) proposeControl(cl *client, n *node) {
	c.values++
	body := fmt.Appendf(nil, "s%d-c%d-control%d", c.config.Seed, cl.number, c.values)
	if n.replica == nil {
		c.refused(cl, nil, 0)
		return
	}
	var p *replica.Proposal
	var err error
	if c.call(n, func() { p, err = n.replica.ProposeControl(controlKind, body) }) {
		cl.hint, cl.nextAt = 0, c.now+1+c.rng.Int64N(20)
		return
	}
	var notLeader *replica.NotLeaderError
	switch {
	case errors.As(err, &notLeader):
		c.refused(cl, nil, notLeader.Leader.Node())
	case err != nil:
		c.refused(cl, nil, 0)
	default:
		cl.waiting = &inflight{node: n, replica: n.replica, proposal: p, control: body,
			deadline: c.now + clientTimeout}
	}
	c.process(n)
}

// refused records produces that were definitely not written.
func (c *cluster) refused(cl *client, ids []int, leader uint32) {
	for _, id := range ids {
		c.history.Failed(id, c.now)
	}
	c.failed += len(ids)
	cl.hint = leader
	cl.nextAt = c.now + 1 + c.rng.Int64N(20)
	c.traceEvent(traceOutcome, uint64(cl.number), uint64(leader), 0)
}

// pollClients resolves the proposals of n's replica that completed.
func (c *cluster) pollClients(n *node) {
	for _, cl := range c.clients {
		w := cl.waiting
		if w == nil || w.node != n {
			continue
		}
		select {
		case <-w.proposal.Done():
			c.finish(cl, w.proposal.Err())
		default:
		}
	}
}

// finish records a proposal's outcome: acknowledged, refused (not in the
// log) or indeterminate.
func (c *cluster) finish(cl *client, err error) {
	w := cl.waiting
	cl.waiting = nil
	cl.nextAt = c.now + 1 + c.rng.Int64N(20)
	c.traceEvent(traceOutcome, uint64(cl.number), w.proposal.Index, outcomeCode(err))
	switch {
	case err == nil && w.control != nil:
		c.checkAckedControl(w)
		c.checkAckDurable(w)
	case err == nil:
		c.checkAckedEntry(w)
		c.checkAckDurable(w)
		for i, id := range w.ids {
			c.history.Acked(id, w.proposal.BaseOffset+uint64(i), c.now)
		}
		c.acked += len(w.ids)
		if c.healed > 0 && c.firstAckHealed == 0 {
			c.firstAckHealed = c.now
		}
	case errors.Is(err, replica.ErrRefused):
		for _, id := range w.ids {
			c.history.Failed(id, c.now)
		}
		c.failed += len(w.ids)
	default:
		for _, id := range w.ids {
			c.history.Indeterminate(id, c.now)
		}
		c.indeterminate += len(w.ids)
		cl.hint = 0
	}
}

func outcomeCode(err error) uint64 {
	switch {
	case err == nil:
		return 1
	case errors.Is(err, replica.ErrRefused):
		return 2
	}
	return 3
}

// checkAckedEntry checks that the committed entry at the acknowledged
// proposal's index holds its records at the offsets the proposal reports.
func (c *cluster) checkAckedEntry(w *inflight) {
	p := w.proposal
	if p.Index == 0 || p.Index > uint64(len(c.committed)) {
		c.violation("acknowledged proposal at index %d, the committed log ends at %d", p.Index, len(c.committed))
		return
	}
	e := c.committed[p.Index-1]
	records, err := decodeRecords(e)
	var got []string
	for _, r := range records {
		got = append(got, fmt.Sprintf("%s@%d", r.Value, r.Offset))
	}
	var want []string
	for i, v := range w.values {
		want = append(want, fmt.Sprintf("%s@%d", v, p.BaseOffset+uint64(i)))
	}
	if err != nil || e.Term != p.Term || !slices.Equal(got, want) {
		c.violation("acknowledged proposal (index %d, term %d) of %v, the committed entry there (term %d, type %d, %d bytes) holds %v",
			p.Index, p.Term, want, e.Term, e.Type, len(e.Data), got)
	}
}

// checkAckedControl checks that the committed entry at a completed
// control proposal's index is that control entry.
func (c *cluster) checkAckedControl(w *inflight) {
	p := w.proposal
	if p.Index == 0 || p.Index > uint64(len(c.committed)) {
		c.violation("completed control proposal at index %d, the committed log ends at %d", p.Index, len(c.committed))
		return
	}
	e := c.committed[p.Index-1]
	payload, err := replica.DecodePayload(e.Data)
	if err != nil || e.Term != p.Term || payload.Kind != replica.PayloadControl || payload.Control != controlKind ||
		string(payload.Body) != string(w.control) {
		c.violation("completed control proposal %q (index %d, term %d), the committed entry there (term %d, type %d) holds %q",
			w.control, p.Index, p.Term, e.Term, e.Type, e.Data)
	}
}

// checkAckDurable holds an acknowledgement against the journals at the
// moment it is made: its entry (index and term) must be synced on a
// majority of the voters (of both halves of a joint configuration). A
// leader computes commit under the configuration it has applied, which may
// be the one before a change it applied in the same batch, so a majority
// of either the current or the previous configuration counts.
func (c *cluster) checkAckDurable(w *inflight) {
	if w.replica != w.node.replica {
		c.violation("an acknowledgement came from a replica that is gone")
		return
	}
	p := w.proposal
	status := w.replica.Status()
	c.noteConfig(status.Config)
	var report []string
	for _, config := range []replica.Membership{c.leaderConfig, c.previousConfig} {
		missing := ""
		for _, voters := range [][]replica.ReplicaID{config.Voters, config.VotersOutgoing} {
			if durable := c.durableVoters(voters, p); len(voters) > 0 && 2*durable <= len(voters) {
				missing = fmt.Sprintf("synced on %d of %d voters: %s", durable, len(voters),
					c.describeDurability(status, voters, p))
			}
		}
		if missing == "" && len(config.Voters) > 0 {
			return
		}
		report = append(report, missing)
	}
	c.violation("acknowledged entry %d (term %d, offset %d) by node %d.%d is not synced on a majority: %s",
		p.Index, p.Term, p.BaseOffset, w.node.number, w.node.incarnation, strings.Join(report, "; previous configuration: "))
}

func (c *cluster) durableVoters(voters []replica.ReplicaID, p *replica.Proposal) int {
	durable := 0
	for _, id := range voters {
		if d := c.diskOf(id); d != nil && d.durableAt(p.Index, p.Term) {
			durable++
		}
	}
	return durable
}

// noteConfig records a leader's configuration, keeping the one before it.
func (c *cluster) noteConfig(config replica.Membership) {
	same := slices.Equal(config.Voters, c.leaderConfig.Voters) &&
		slices.Equal(config.VotersOutgoing, c.leaderConfig.VotersOutgoing)
	if !same {
		c.previousConfig, c.leaderConfig = c.leaderConfig, config
	}
}

func (c *cluster) describeDurability(s replica.Status, voters []replica.ReplicaID, p *replica.Proposal) string {
	var parts []string
	for _, id := range voters {
		d := c.diskOf(id)
		parts = append(parts, fmt.Sprintf("%d.%d match %d synced %v (%v)", id.Node(), id.Incarnation(), s.Match[id],
			d != nil && d.durableAt(p.Index, p.Term), d))
	}
	return strings.Join(parts, "; ")
}

// diskOf is the disk of a replica: a running incarnation's, or the last
// state of one that was wiped (what it synced stays counted: a later loss
// of the disk does not undo a quorum that was there).
func (c *cluster) diskOf(id replica.ReplicaID) *disk {
	if n := c.nodes[id.Node()-1]; n.id == id {
		return n.disk
	}
	return c.retired[id]
}

// readStep reads, now and then, one committed record from a running
// replica below its watermark.
func (c *cluster) readStep() {
	if c.rng.IntN(8) != 0 {
		return
	}
	n := c.pickNode(func(n *node) bool { return n.replica != nil && n.stop == nil })
	if n == nil {
		return
	}
	status := n.replica.Status()
	if status.Watermark == 0 {
		return
	}
	offset := c.rng.Uint64N(status.Watermark)
	if c.rng.IntN(2) == 0 {
		offset = status.Watermark - 1 - c.rng.Uint64N(min(status.Watermark, 10))
	}
	value, err := c.readAt(n, offset, status.Applied)
	switch {
	case err != nil && errors.Is(err, replica.ErrDamaged) && len(n.disk.corrupted) > 0:
		return // the planted damage; the replica finds it when it reads
	case err != nil && errors.Is(err, replica.ErrCompacted):
		return // removed by retention
	case err != nil:
		c.violation("node %d cannot read offset %d below its watermark %d: %v", n.number, offset,
			status.Watermark, err)
		return
	}
	c.history.Read(readerClient, 0, offset, value, true, c.now, c.now)
	c.reads++
}

// readAt reads the record at offset from the node's journal, as a
// follower serving a consumer would.
func (c *cluster) readAt(n *node, offset, applied uint64) (string, error) {
	if first := n.disk.FirstIndex(); n.scannedTo+1 < first {
		// Retention removed entries not yet indexed: the index starts
		// again at the journal's start, and reads below it are refused.
		n.scannedTo, n.dataEntries = first-1, nil
	}
	if n.scannedTo < applied {
		entries, err := n.disk.Entries(n.scannedTo+1, applied+1, ^uint64(0))
		if err != nil {
			return "", err
		}
		for _, e := range entries {
			if e.Type != replica.EntryNormal {
				continue
			}
			payload, err := replica.DecodePayload(e.Data)
			if err != nil {
				return "", err
			}
			if payload.Kind == replica.PayloadData {
				n.dataEntries = append(n.dataEntries, dataEntry{base: payload.Data.BaseOffset,
					count: payload.Data.Count, index: e.Index})
			}
		}
		n.scannedTo = applied
	}
	i, found := slices.BinarySearchFunc(n.dataEntries, offset, func(d dataEntry, o uint64) int {
		switch {
		case d.base+uint64(d.count) <= o:
			return -1
		case d.base > o:
			return 1
		}
		return 0
	})
	if !found && n.disk.FirstIndex() > 1 && (len(n.dataEntries) == 0 || offset < n.dataEntries[0].base) {
		return "", fmt.Errorf("%w: offset %d", replica.ErrCompacted, offset)
	}
	if !found {
		return "", fmt.Errorf("no data entry holds offset %d", offset)
	}
	d := n.dataEntries[i]
	entries, err := n.disk.Entries(d.index, d.index+1, ^uint64(0))
	if err != nil {
		return "", err
	}
	records, err := decodeRecords(entries[0])
	if err != nil {
		return "", err
	}
	for _, r := range records {
		if r.Offset == offset {
			return r.Value, nil
		}
	}
	return "", fmt.Errorf("entry %d does not hold offset %d", d.index, offset)
}
