package dedup

import (
	"testing"
)

func validRun() []byte {
	t := newTable(300)
	for i := range 300 {
		t.put(hashID(idOf(i)), uint64(1000+i), 0)
	}
	entries := t.sorted(2000)
	f := newBloom(len(entries))
	for _, e := range entries {
		f.add(e.hash)
	}
	return encodeRun(runHeader{seq: 3, coversUpTo: 1300, baseOffset: 1000}, entries, f)
}

// FuzzDecodeRun: a generation file of any bytes is refused or decodes
// to something every later read can use, never a panic.
func FuzzDecodeRun(f *testing.F) {
	f.Add(validRun())
	f.Add([]byte("IRONDDUP"))
	f.Fuzz(func(t *testing.T, image []byte) {
		run, err := decodeRun(image)
		if err != nil {
			return
		}
		for block := range run.fences {
			start := runHeaderSize + block*blockBytes
			data := image[start:min(start+blockBytes, run.header.crcsAt())]
			if _, ok, err := searchBlock(data, run.crcs[block], run.fences[block]); err != nil || !ok {
				t.Fatalf("block %d does not hold its own first hash: %v", block, err)
			}
		}
		run.bloom.has(run.fences[0])
	})
}

// FuzzDecodeBloom: a filter of any bytes is refused or usable.
func FuzzDecodeBloom(f *testing.F) {
	filter := newBloom(100)
	filter.add(42)
	f.Add(appendBloom(nil, filter))
	f.Add([]byte{7, 0, 0, 0, 8, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		decoded, err := decodeBloom(b)
		if err != nil {
			return
		}
		decoded.add(1)
		if !decoded.has(1) {
			t.Fatal("a decoded filter lost what was added to it")
		}
	})
}

func TestBloomFalsePositives(t *testing.T) {
	const ids = 3072
	filter := newBloom(ids)
	for i := range ids {
		filter.add(hashID(idOf(i)))
	}
	positives := 0
	for i := ids; i < 11*ids; i++ {
		if filter.has(hashID(idOf(i))) {
			positives++
		}
	}
	if rate := float64(positives) / (10 * ids); rate > 0.03 {
		t.Fatalf("false positive rate %.3f", rate)
	} else {
		t.Logf("false positive rate %.4f", rate)
	}
}

func TestRunRoundTrip(t *testing.T) {
	image := validRun()
	run, err := decodeRun(image)
	if err != nil {
		t.Fatal(err)
	}
	if run.header.count != 300 || len(run.fences) != 2 {
		t.Fatalf("decoded %d ids in %d blocks", run.header.count, len(run.fences))
	}
	for i := range 300 {
		if !run.bloom.has(hashID(idOf(i))) {
			t.Fatalf("the filter misses id %d", i)
		}
	}
	for _, flip := range []int{3, 70, 200, len(image) - 2} {
		bad := append([]byte(nil), image...)
		bad[flip] ^= 1
		if _, err := decodeRun(bad); err == nil {
			t.Errorf("a flipped byte at %d decoded", flip)
		}
	}
}
