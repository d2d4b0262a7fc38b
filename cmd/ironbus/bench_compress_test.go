package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBenchPayloadsCycleThroughTheFile: payloads are consecutive cuts of
// the sample, wrapping at its end, so every byte of it is used.
func TestBenchPayloadsCycleThroughTheFile(t *testing.T) {
	payloads := benchPayloads{source: []byte("abcde")}
	payload := make([]byte, 3)
	position := 0
	var got []string
	for range 4 {
		position = payloads.fill(payload, position)
		got = append(got, string(payload))
	}
	if strings.Join(got, ",") != "abc,dea,bcd,eab" {
		t.Fatalf("payloads %q", got)
	}
	long := make([]byte, 12)
	payloads.fill(long, 0)
	if string(long) != "abcdeabcdeab" {
		t.Fatalf("a payload longer than the file: %q", long)
	}
	zeros := make([]byte, 4)
	if (benchPayloads{}).fill(zeros, 0) != 0 || string(zeros) != "\x00\x00\x00\x00" {
		t.Fatalf("without a file the payload must stay zeros: %q", zeros)
	}
}

// TestBenchCompressesRealPayloads: with a sample of text, lz4 stores
// fewer bytes per payload byte than none, and the report says which codec
// ran on which payloads.
func TestBenchCompressesRealPayloads(t *testing.T) {
	if binaryWrapper != "" {
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
	run := func(codec string) benchResult {
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
