package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ironbus/ironbus/benchrig/load"
)

// TestBenchCompressesRealPayloads: with a sample of text, lz4 stores
// fewer bytes per payload byte than none, and the report says which codec
// ran on which payloads.
func TestBenchCompressesRealPayloads(t *testing.T) {
	if ironbus.Emulator() != "" {
		t.Skip("bench starts its broker by re-executing itself, which needs binfmt_misc under emulation")
	}
	sample := filepath.Join(t.TempDir(), "sample.jsonl")
	var text strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&text, `{"sensor":"temp-%d","seq":%d,"site":"cabinet-north","status":"ok"}`+"\n", i%16, i)
	}
	if err := os.WriteFile(sample, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(codec string) load.Result {
		return runBenchJSON(t, "--count", "3000", "--payload-bytes", "1024", "--compress", codec, "--payload-file", sample)
	}
	plain, lz4 := run("none"), run("lz4")
	if plain.Compression != "none" || lz4.Compression != "lz4" || lz4.PayloadFile != sample || lz4.Records != 3000 {
		t.Fatalf("reports: %+v\n%+v", plain, lz4)
	}
	if runtime.GOOS == "linux" && !(lz4.DiskPerPayload < plain.DiskPerPayload*0.8) {
		t.Fatalf("lz4 wrote %.3f disk bytes per payload byte, none %.3f: compression did not reach the disk",
			lz4.DiskPerPayload, plain.DiskPerPayload)
	}
	for _, args := range [][]string{{"--compress", "brotli"}, {"--payload-file", filepath.Join(t.TempDir(), "empty")}} {
		if args[0] == "--payload-file" {
			if err := os.WriteFile(args[1], nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		expectCode(t, runCLI(t, append([]string{"bench", "--count", "10"}, args...)...), exitUsage)
	}
	expectCode(t, runCLI(t, "bench", "--count", "10", "--payload-file", filepath.Join(t.TempDir(), "missing")), exitNotFound)
}
