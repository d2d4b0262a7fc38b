package keyindex

import (
	"fmt"
	"testing"

	"github.com/ironbus/ironbus/segment/vfs"
)

// BenchmarkPut is the append path's cost per record with a subject: a
// hash and a map update under the index's lock (flushes run elsewhere,
// so here the overlay's in-place updates dominate).
func BenchmarkPut(b *testing.B) {
	index, subjects := benchIndex(b)
	defer index.Close()
	b.ReportAllocs()
	offset := uint64(0)
	for b.Loop() {
		index.Put(subjects[offset%uint64(len(subjects))], offset)
		offset++
	}
}

// BenchmarkLast is an expectation check whose subject is in the table,
// not the overlay: one 8 KiB pread from the page cache and two CRCs.
func BenchmarkLast(b *testing.B) {
	index, subjects := benchIndex(b)
	defer index.Close()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, _, err := index.Last(subjects[n%len(subjects)]); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// benchIndex is an index on an OS directory holding 4096 subjects, all
// flushed to the table.
func benchIndex(b *testing.B) (*Index, [][]byte) {
	b.Helper()
	index, err := Open(vfs.OS{}, b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	subjects := make([][]byte, 4096)
	for n := range subjects {
		subjects[n] = []byte(fmt.Sprint("sensors.floor-3.device-", n))
		index.Put(subjects[n], uint64(n))
	}
	index.Durable(uint64(len(subjects)))
	if err := index.Flush(); err != nil {
		b.Fatal(err)
	}
	return index, subjects
}
