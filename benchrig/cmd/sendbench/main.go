//go:build linux

// Command sendbench measures the two ways the streaming tier can send
// stored record frames to a plaintext socket: writev from the mapped
// segment (what the broker does) and sendfile from the segment file, each
// behind the small DeliverBatch header, over loopback, per batch size. It
// is how the size gate between the two paths was decided
// (docs/BENCHMARKS.md, "Consume").
//
//	go run ./benchrig/cmd/sendbench -dir /var/tmp -runs 3
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const headerBytes = 28 // a DeliverBatch header after the frame envelope

func main() {
	dir := flag.String("dir", os.TempDir(), "directory for the segment-sized file (its disk's page cache is used)")
	runs := flag.Int("runs", 3, "runs per size; the median is reported")
	total := flag.Int64("bytes", 512<<20, "bytes sent per run")
	flag.Parse()
	if err := run(*dir, *runs, *total); err != nil {
		fmt.Fprintln(os.Stderr, "sendbench:", err)
		os.Exit(1)
	}
}

func run(dir string, runs int, total int64) error {
	const fileBytes = 64 << 20
	path := filepath.Join(dir, "sendbench.segment")
	if err := os.WriteFile(path, make([]byte, fileBytes), 0o644); err != nil {
		return err
	}
	defer os.Remove(path)
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	mapping, err := unix.Mmap(int(file.Fd()), 0, fileBytes, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(mapping)
	fmt.Printf("%-9s %14s %14s %16s %16s\n", "batch", "writev MB/s", "sendfile MB/s", "writev CPU s/GB", "sendfile CPU s/GB")
	for _, batch := range []int{16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20} {
		var writev, sendfile []result
		for range runs {
			w, err := measure(total, batch, func(socket int, offset int64, header []byte) error {
				_, err := unix.Writev(socket, [][]byte{header, mapping[offset : offset+int64(batch)]})
				return err
			})
			if err != nil {
				return err
			}
			s, err := measure(total, batch, func(socket int, offset int64, header []byte) error {
				if _, err := unix.Write(socket, header); err != nil {
					return err
				}
				for sent := 0; sent < batch; {
					at := offset + int64(sent)
					n, err := unix.Sendfile(socket, int(file.Fd()), &at, batch-sent)
					if err != nil && err != unix.EAGAIN {
						return err
					}
					sent += max(n, 0)
				}
				return nil
			})
			if err != nil {
				return err
			}
			writev, sendfile = append(writev, w), append(sendfile, s)
		}
		w, s := median(writev), median(sendfile)
		fmt.Printf("%-9s %14.0f %14.0f %16.3f %16.3f\n", size(batch), w.mbPerSecond, s.mbPerSecond, w.cpuPerGB, s.cpuPerGB)
	}
	return nil
}

type result struct{ mbPerSecond, cpuPerGB float64 }

func median(results []result) result {
	sort.Slice(results, func(i, j int) bool { return results[i].mbPerSecond < results[j].mbPerSecond })
	return results[len(results)/2]
}

func size(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// measure sends total bytes in batches over a fresh loopback connection
// drained by a reader, and returns the rate and the process CPU per GB.
func measure(total int64, batch int, send func(socket int, offset int64, header []byte) error) (result, error) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	defer listener.Close()
	drained := make(chan error, 1)
	go func() {
		conn, err := listener.Accept()
		if err != nil {
			drained <- err
			return
		}
		defer conn.Close()
		_, err = io.Copy(io.Discard, conn)
		drained <- err
	}()
	conn, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		return result{}, err
	}
	raw, err := conn.(*net.TCPConn).File() // a blocking duplicate for the raw syscalls
	if err != nil {
		return result{}, err
	}
	socket := int(raw.Fd())
	header := make([]byte, headerBytes)
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	began := time.Now()
	for sent := int64(0); sent < total; sent += int64(batch) {
		if err := send(socket, sent%(64<<20-int64(batch)+1)/4096*4096, header); err != nil {
			return result{}, err
		}
	}
	elapsed := time.Since(began)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	_ = raw.Close()
	_ = conn.Close()
	if err := <-drained; err != nil {
		return result{}, err
	}
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	gigabytes := float64(total) / 1e9
	return result{mbPerSecond: float64(total) / elapsed.Seconds() / 1e6, cpuPerGB: cpu.Seconds() / gigabytes}, nil
}
