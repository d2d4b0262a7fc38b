package floor

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ironbus/ironbus/benchrig"
)

// answerBytes is the TCP floor's answer to each message (the whole
// message when it is shorter).
const answerBytes = 16

// TCP measures the TCP floor for messages of size bytes back to back
// (perSecond) or, with rate > 0, at rate messages a second in open loop
// (latencies from the intended send time). Its server writes through
// loop's file; the loop must not run meanwhile.
func TCP(loop *RawLoop, size, rate int, duration time.Duration) (perSecond float64, latencies []time.Duration, err error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, fmt.Errorf("tcp floor: %w", err)
	}
	defer listener.Close()
	served := make(chan error, 1)
	go serve(listener, loop, size, served)
	conn, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		return 0, nil, fmt.Errorf("tcp floor: %w", err)
	}
	message, answer := Payload(size), make([]byte, min(size, answerBytes))
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

// serve answers one connection: each message read whole, written and
// synced, then answered. It reports nil when the client hangs up.
func serve(listener net.Listener, loop *RawLoop, size int, served chan<- error) {
	conn, err := listener.Accept()
	if err != nil {
		served <- err
		return
	}
	defer conn.Close()
	buffer := make([]byte, size)
	for {
		if _, err := io.ReadFull(conn, buffer); err != nil {
			served <- nil
			return
		}
		if err := loop.WriteAndSync(buffer); err != nil {
			served <- err
			return
		}
		if _, err := conn.Write(buffer[:min(size, answerBytes)]); err != nil {
			served <- err
			return
		}
	}
}
