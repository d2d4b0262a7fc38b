package client

import (
	"fmt"

	"github.com/ironbus/ironbus/wire"
)

// dispatch routes one frame from the server. A returned error is a
// connection-level failure: the reader finishes the connection with it.
// Frame bodies alias the read buffer, so every handler copies what it
// keeps.
func (c *Client) dispatch(f wire.Frame) error {
	switch f.Type {
	case wire.TypeProduceAck:
		return c.onProduceAck(f)
	case wire.TypeError:
		return c.onError(f)
	case wire.TypeDeliver, wire.TypeGap, wire.TypeDeliverBatch:
		return c.onConsumePart(f)
	case wire.TypeConsumeEnd:
		return c.onConsumeEnd(f)
	case wire.TypeAckResult:
		return c.onAckResult(f)
	case wire.TypePong:
		return c.onPong(f)
	case wire.TypeGroupInfo:
		return c.onGroupInfo(f)
	case wire.TypeGroupList, wire.TypeDeadLetterState, wire.TypeStreamList, wire.TypeProducerInfo, wire.TypeStreamCompacted, wire.TypeClusterState,
		wire.TypeLeaderTransferred:
		return c.onAdmin(f)
	case wire.TypeTxnState:
		return c.onTxnState(f)
	case wire.TypePing:
		payload, err := wire.DecodePing(f.Body)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		c.enqueue(f.RequestID, &wire.Pong{Payload: payload})
		return nil
	}
	return fmt.Errorf("%w: unexpected %s frame (request %d)", ErrProtocol, f.Type, f.RequestID)
}

// onProduceAck completes a produce. Produce entries stay in the table
// until answered, even when their caller gave up, so an ack for an id not
// in flight means the server is confused about what it was sent.
func (c *Client) onProduceAck(f wire.Frame) error {
	ack, err := wire.DecodeProduceAck(f.Body)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	e, ok, err := c.take(f, acceptsProduce)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%w: ProduceAck for request %d, which is not in flight", ErrProtocol, f.RequestID)
	}
	c.finishProduce(e, ackOf(ack), nil)
	return nil
}

// onError hands a server error to the request it answers, as the
// *wire.Error itself. An Error with id 0 or the closes flag is about the
// connection: the reader then fails everything else with it.
func (c *Client) onError(f wire.Frame) error {
	werr, err := wire.DecodeError(f.Body)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if f.RequestID != 0 {
		if e, ok, _ := c.take(f, acceptsAny); ok && e.kind != kindKeepalive {
			c.finish(e, werr)
		} else if ok {
			c.pingID.CompareAndSwap(f.RequestID, 0)
		}
	}
	if f.RequestID == 0 || werr.Closes {
		return werr
	}
	return nil
}

// peekFetch returns the call of an in-flight Consume. nil means the Fetch
// was abandoned: the frame is dropped (its lease simply expires).
func (c *Client) peekFetch(f wire.Frame) (*call, error) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	slot := c.pending.get(f.RequestID)
	switch {
	case slot == nil:
		return nil, nil
	case slot.kind != kindFetch:
		return nil, fmt.Errorf("%w: %s frame answers request %d, a %s", ErrProtocol, f.Type, f.RequestID, slot.kind)
	}
	return slot.call, nil
}

// onConsumePart adds a Deliver or Gap to its Fetch. Only the reader
// touches the call's fetch state until ConsumeEnd signals the caller.
func (c *Client) onConsumePart(f wire.Frame) error {
	var (
		deliver wire.Deliver
		gap     wire.Gap
		batch   wire.DeliverBatch
		err     error
	)
	switch f.Type {
	case wire.TypeDeliver:
		deliver, err = wire.DecodeDeliver(f.Body)
	case wire.TypeDeliverBatch:
		batch, err = wire.DecodeDeliverBatch(f.Body)
	default:
		gap, err = wire.DecodeGap(f.Body)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	cl, err := c.peekFetch(f)
	if cl == nil || err != nil {
		return err
	}
	switch f.Type {
	case wire.TypeDeliver:
		cl.fetch.deliver(deliver)
	case wire.TypeDeliverBatch:
		cl.fetch.batch(batch)
	default:
		cl.fetch.gap(gap)
	}
	return nil
}

func (c *Client) onConsumeEnd(f wire.Frame) error {
	end, err := wire.DecodeConsumeEnd(f.Body)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	e, ok, err := c.take(f, acceptsFetch)
	if !ok {
		return err // nil for an abandoned Fetch
	}
	// Frames cannot go missing on one TCP stream, so a count that differs
	// means the server and this client disagree about the protocol.
	if got := e.call.fetch.delivered; uint32(got) != end.Delivered {
		err := fmt.Errorf("%w: ConsumeEnd of request %d counts %d deliveries, %d arrived", ErrProtocol, f.RequestID, end.Delivered, got)
		c.finish(e, c.lost(err))
		return err
	}
	e.call.fetch.reason = end.Reason
	e.call.done <- struct{}{}
	return nil
}

func (c *Client) onAckResult(f wire.Frame) error {
	result, err := wire.DecodeAckResult(f.Body)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	e, ok, err := c.take(f, acceptsAck)
	if !ok {
		return err // nil for an abandoned Ack
	}
	if len(result.Statuses) != e.call.want {
		err := fmt.Errorf("%w: AckResult of request %d has %d statuses for %d entries", ErrProtocol, f.RequestID, len(result.Statuses), e.call.want)
		c.finish(e, c.lost(err))
		return err
	}
	statuses := make([]AckStatus, len(result.Statuses))
	for i, s := range result.Statuses {
		statuses[i] = AckStatus(s)
	}
	e.call.statuses = statuses
	e.call.done <- struct{}{}
	return nil
}

func (c *Client) onPong(f wire.Frame) error {
	payload, err := wire.DecodePing(f.Body)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	e, ok, err := c.take(f, acceptsPong)
	if !ok {
		return err // nil for an abandoned Ping
	}
	if e.kind == kindKeepalive {
		c.pingID.CompareAndSwap(f.RequestID, 0)
		return nil
	}
	if payload != e.call.payload {
		e.call.err = fmt.Errorf("%w: Pong payload %d, Ping sent %d", ErrProtocol, payload, e.call.payload)
	}
	e.call.done <- struct{}{}
	return nil
}

func (c *Client) onGroupInfo(f wire.Frame) error {
	info, err := wire.DecodeGroupInfo(f.Body)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	e, ok, err := c.take(f, acceptsGroup)
	if !ok {
		return err // nil for an abandoned OpenGroup
	}
	e.call.group = GroupInfo{Type: GroupType(info.Mode), Committed: info.Committed}
	e.call.done <- struct{}{}
	return nil
}
