package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestPubSubDumpWithEachCodec publishes a compressible payload with each
// --compress choice through a real broker, reads it back with sub (human
// and JSON), then stops the broker and reads the data directory with peek
// and dump: every reader shows the payload as sent and names the codec.
func TestPubSubDumpWithEachCodec(t *testing.T) {
	dataDir := t.TempDir()
	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	payload := strings.Repeat(`{"sensor":"cabinet-7","celsius":21.5,"ok":true}`, 8)
	codecs := []string{"lz4", "zstd", "none"}
	for _, codec := range codecs {
		pub := runCLI(t, "pub", "--addr", broker.Addr(), "--stream", "c-"+codec, "--compress", codec, payload)
		expectCode(t, pub, exitClean)
		sub := runCLI(t, "sub", "--addr", broker.Addr(), "--stream", "c-"+codec, "--group", "g", "--max", "1", "--wait", "2s")
		expectCode(t, sub, exitClean)
		want := "#0 key= codec=" + codec + " payload=" + payload
		if codec == "none" {
			want = "#0 key= payload=" + payload
		}
		if got := strings.TrimSpace(sub.stdout); got != want {
			t.Errorf("sub of %s:\n got %q\nwant %q", codec, got, want)
		}
		subJSON := runCLI(t, "sub", "--addr", broker.Addr(), "--stream", "c-"+codec, "--group", "j", "--max", "1", "--json", "--wait", "2s")
		var message subMessage
		if err := json.Unmarshal([]byte(strings.TrimSpace(subJSON.stdout)), &message); err != nil ||
			message.Payload != payload || message.Codec != codec {
			t.Errorf("sub --json of %s: %q %v", codec, subJSON.stdout, err)
		}
	}
	badCodec := runCLI(t, "pub", "--addr", broker.Addr(), "--compress", "gzip", "x")
	expectCode(t, badCodec, exitUsage)
	if !strings.Contains(badCodec.stderr, "lz4, zstd or none") {
		t.Errorf("--compress gzip: %q does not say what is accepted", badCodec.stderr)
	}
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("broker exit %d", code)
	}
	for _, codec := range codecs {
		dump := runCLI(t, "dump", "--data-dir", dataDir, "--stream", "c-"+codec)
		expectCode(t, dump, exitClean)
		var record recordOutput
		if err := json.Unmarshal([]byte(strings.TrimSpace(dump.stdout)), &record); err != nil {
			t.Fatalf("dump of %s: %q %v", codec, dump.stdout, err)
		}
		if record.Payload != payload || record.Codec != codec || record.RawLength != uint32(len(payload)) ||
			(codec != "none") != (record.StoredLength < len(payload)) {
			t.Errorf("dump of %s: %+v", codec, record)
		}
		peek := runCLI(t, "peek", "--data-dir", dataDir, "--stream", "c-"+codec)
		expectCode(t, peek, exitClean)
		if !strings.Contains(peek.stdout, fmt.Sprintf("%dB payload=%s", len(payload), payload)) ||
			(codec != "none") != strings.Contains(peek.stdout, "codec="+codec) {
			t.Errorf("peek of %s: %q", codec, peek.stdout)
		}
	}
}
