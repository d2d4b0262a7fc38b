package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ironbus/ironbus/benchrig"
)

// The TCP floor: the lowest an awaited durable produce can cost on this
// machine over loopback. A server goroutine in this process reads each
// message, writes it to a zero-filled file and fdatasyncs it, then answers
// 16 bytes; the client writes a message and blocks reading the answer. No
// broker, no protocol, no goroutine hand-off but the two the kernel's
// loopback forces. It carries the same durability as ironbus-sync (fsync
// before the answer), so ratios against it are fair, and it shows how much
// of the raw loop's rate any TCP service can keep here.

const floorAnswer = 16

// tcpFloor measures the floor back to back (perSecond) or, with rate > 0,
// at rate messages a second in open loop (latencies from the intended send
// time, as L1 counts). It writes through the raw loop, into its file,
// whose blocks are already written; the loop must not run meanwhile.
func tcpFloor(loop *rawLoop, size, rate int, duration time.Duration) (perSecond float64, latencies []time.Duration, err error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, fmt.Errorf("tcp floor: %w", err)
	}
	defer listener.Close()
	served := make(chan error, 1)
	go func() {
		conn, err := listener.Accept()
		if err != nil {
			served <- err
			return
		}
		defer conn.Close()
		buffer := make([]byte, size)
		for {
			if _, err := io.ReadFull(conn, buffer); err != nil {
				served <- nil // the client hung up
				return
			}
			if err := loop.writeAndSync(buffer); err != nil {
				served <- err
				return
			}
			if _, err := conn.Write(buffer[:floorAnswer]); err != nil {
				served <- err
				return
			}
		}
	}()
	conn, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		return 0, nil, fmt.Errorf("tcp floor: %w", err)
	}
	message, answer := payloadOf(size), make([]byte, floorAnswer)
	send := func() error {
		if _, err := conn.Write(message); err != nil {
			return err
		}
		_, err := io.ReadFull(conn, answer)
		return err
	}
	start := time.Now()
	if rate > 0 {
		latencies, err = benchrig.OpenLoop(rate, duration, send)
	} else {
		for time.Since(start) < duration && err == nil {
			began := time.Now()
			if err = send(); err == nil {
				latencies = append(latencies, time.Since(began))
			}
		}
	}
	elapsed := time.Since(start)
	_ = conn.Close()
	if serveErr := <-served; serveErr != nil || err != nil {
		return 0, nil, fmt.Errorf("tcp floor: %w", errors.Join(err, serveErr))
	}
	return float64(len(latencies)) / elapsed.Seconds(), latencies, nil
}
