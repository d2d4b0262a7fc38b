package loop

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkEcho measures round trips of small messages over many
// connections (the broker's common case: many clients, small frames), per
// backend, through the conformance echo session.
func BenchmarkEcho(b *testing.B) {
	for _, backend := range backendsUnderTest(b) {
		b.Run(backend, func(b *testing.B) {
			_, addr := startServer(b, backend, Config{}, echoHandler{})
			const conns, size = 64, 128
			var next atomic.Int64
			var wait sync.WaitGroup
			b.ResetTimer()
			for range conns {
				conn := dial(b, addr)
				wait.Add(1)
				go func() {
					defer wait.Done()
					message, reply := make([]byte, size), make([]byte, size)
					for next.Add(1) <= int64(b.N) {
						if _, err := conn.Write(message); err != nil {
							b.Error(err)
							return
						}
						if _, err := io.ReadFull(conn, reply); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wait.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "roundtrips/s")
		})
	}
}

// BenchmarkStream measures one-way bulk throughput echoed back over a few
// connections.
func BenchmarkStream(b *testing.B) {
	for _, backend := range backendsUnderTest(b) {
		b.Run(backend, func(b *testing.B) {
			_, addr := startServer(b, backend, Config{}, echoHandler{})
			const conns, chunk = 4, 256 << 10
			b.SetBytes(chunk)
			var next atomic.Int64
			var wait sync.WaitGroup
			b.ResetTimer()
			for range conns {
				conn := dial(b, addr)
				wait.Add(2)
				go func() {
					defer wait.Done()
					payload := make([]byte, chunk)
					for next.Add(1) <= int64(b.N) {
						if _, err := conn.Write(payload); err != nil {
							b.Error(err)
							break
						}
					}
					// The echo session closes once it read everything, which
					// ends the reader below.
					_ = conn.(*net.TCPConn).CloseWrite()
				}()
				go func() {
					defer wait.Done()
					if _, err := io.Copy(io.Discard, conn); err != nil {
						b.Error(err)
					}
				}()
			}
			wait.Wait()
		})
	}
}
