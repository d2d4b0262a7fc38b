package main

import (
	"fmt"
	"net"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// rawWire is P1 without the SDK: one goroutine writes each Produce frame
// and reads its answer itself, as the TCP floor's client does, so the
// broker's own share of P1 can be told from the SDK's hand-off between its
// reader goroutine and the caller.
func rawWire(addr string, size int, duration time.Duration) (result, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return result{}, err
	}
	defer conn.Close()
	hello := wire.Hello{MinVersion: wire.ProtocolVersion, MaxVersion: wire.ProtocolVersion,
		Capabilities: wire.Capabilities, MaxFrame: wire.DefaultMaxFrame, Window: 1, ClientName: "awaitbench-raw"}
	if _, err := conn.Write(wire.Append(nil, 0, &hello)); err != nil {
		return result{}, err
	}
	buf := make([]byte, 0, 64<<10)
	next := func() (wire.Frame, error) {
		for {
			frame, n, err := wire.ParseFrame(buf, wire.DefaultMaxFrame)
			if err == nil {
				buf = append(buf[:0], buf[n:]...)
				return frame, nil
			}
			if err != wire.ErrIncomplete {
				return frame, err
			}
			read, err := conn.Read(buf[len(buf):cap(buf)])
			if err != nil {
				return wire.Frame{}, err
			}
			buf = buf[:len(buf)+read]
		}
	}
	if frame, err := next(); err != nil || frame.Type != wire.TypeWelcome {
		return result{}, fmt.Errorf("raw wire: no Welcome (%v, %v)", frame.Type, err)
	}
	body, err := record.AppendBody(nil, record.Body{Payload: make([]byte, size)})
	if err != nil {
		return result{}, err
	}
	produce := wire.Produce{Stream: []byte("bench"), Partition: wire.PartitionAny, BodyCRC: record.Checksum(body), Body: body}
	var latencies []time.Duration
	var out []byte
	start := time.Now()
	for id := uint32(1); time.Since(start) < duration; id++ {
		began := time.Now()
		out = wire.Append(out[:0], id, &produce)
		if _, err := conn.Write(out); err != nil {
			return result{}, err
		}
		frame, err := next()
		if err != nil {
			return result{}, err
		}
		if frame.Type != wire.TypeProduceAck || frame.RequestID != id {
			return result{}, fmt.Errorf("raw wire: answer %v to request %d", frame.Type, id)
		}
		latencies = append(latencies, time.Since(began))
	}
	return summarize(latencies, time.Since(start)), nil
}
