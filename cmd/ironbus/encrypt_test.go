package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
)

const secretMarker = "PLAINTEXT-SECRET-"

// produceSecrets publishes n uncompressed records whose payloads carry
// secretMarker, from offset base on, and waits for every ack.
func produceSecrets(t *testing.T, addr string, base, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	producer := c.NewProducer("orders", client.ProducerOptions{Compression: client.CompressNone})
	for i := range n {
		payload := fmt.Sprintf("%s%06d-%s", secretMarker, base+i, strings.Repeat("x", i%300))
		if err := producer.Send(ctx, client.Record{Subject: "orders.secret", Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := producer.Close(); err != nil {
		t.Fatal(err)
	}
}

// requireNoPlaintext fails if any file under root holds secretMarker.
func requireNoPlaintext(t *testing.T, root string) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil || entry.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if bytes.Contains(data, []byte(secretMarker)) || bytes.Contains(data, []byte("orders.secret")) {
			t.Errorf("%s holds the plaintext of a published record", path)
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("walking %s: %v (%d files)", root, err, files)
	}
}

func keyIDsOf(t *testing.T, result cliResult) []uint32 {
	t.Helper()
	var out struct {
		KeyIDs []uint32 `json:"key_ids_in_use"`
	}
	if err := json.Unmarshal([]byte(result.stdout), &out); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, result.stdout)
	}
	return out.KeyIDs
}

// TestEncryptionAtRestThroughEveryTool: a broker with --encryption-key-file
// stores no plaintext; a start without the ring or with another exits 1
// naming the flag and changes nothing; every offline tool works with the
// ring; a backup stays encrypted; rotation keeps old records readable.
func TestEncryptionAtRestThroughEveryTool(t *testing.T) {
	base := t.TempDir()
	dataDir, ring, other := filepath.Join(base, "data"), filepath.Join(base, "data.keys"), filepath.Join(base, "other.keys")
	expectCode(t, runCLI(t, "key", "create", "--out", ring), exitClean)
	expectCode(t, runCLI(t, "key", "create", "--out", other), exitClean)
	if info, err := os.Stat(ring); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key ring mode: %v %v", info.Mode(), err)
	}
	expectCode(t, runCLI(t, "key", "create", "--out", ring), exitUsage)

	broker := ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "64KiB",
		"--encryption-key-file", ring)
	produceSecrets(t, broker.Addr(), 0, 400)
	if got := len(readAllRecords(t, broker.Addr())); got != 400 {
		t.Fatalf("an encrypted broker serves %d records, want 400", got)
	}
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("broker stop exited %d", code)
	}
	requireNoPlaintext(t, dataDir)

	before := treeDigest(t, dataDir)
	for _, args := range [][]string{{}, {"--encryption-key-file", other}} {
		result := runCLI(t, append([]string{"serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0"}, args...)...)
		expectCode(t, result, exitUsage)
		if !strings.Contains(result.stderr, "--encryption-key-file") {
			t.Fatalf("serve %v: the refusal does not name --encryption-key-file:\n%s", args, result.stderr)
		}
	}
	if err := os.Chmod(ring, 0o644); err != nil {
		t.Fatal(err)
	}
	expectCode(t, runCLI(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--encryption-key-file", ring), exitUsage)
	if err := os.Chmod(ring, 0o600); err != nil {
		t.Fatal(err)
	}
	if after := treeDigest(t, dataDir); !maps.Equal(before, after) {
		t.Fatal("a refused start changed the data directory")
	}

	key := []string{"--encryption-key-file", ring}
	wrong := []string{"--encryption-key-file", other}
	verify := runCLI(t, append([]string{"verify", "--data-dir", dataDir, "--json"}, key...)...)
	expectCode(t, verify, exitClean)
	if ids := keyIDsOf(t, verify); !slices.Equal(ids, []uint32{1}) {
		t.Fatalf("verify lists key ids %v, want [1]", ids)
	}
	expectCode(t, runCLI(t, append([]string{"verify", "--data-dir", dataDir}, wrong...)...), exitUsage)
	// Without the ring, verify and scrub still check every stored byte.
	if ids := keyIDsOf(t, runCLI(t, "verify", "--data-dir", dataDir, "--json")); !slices.Equal(ids, []uint32{1}) {
		t.Fatalf("verify without the ring lists key ids %v, want [1]", ids)
	}
	expectCode(t, runCLI(t, "scrub", "--data-dir", dataDir), exitClean)
	peek := runCLI(t, append([]string{"peek", "--data-dir", dataDir, "--stream", "orders", "--limit", "3"}, key...)...)
	expectCode(t, peek, exitClean)
	if !strings.Contains(peek.stdout, secretMarker+"000002") {
		t.Fatalf("peek with the ring does not show the records:\n%s", peek.stdout)
	}
	noKey := runCLI(t, "peek", "--data-dir", dataDir, "--stream", "orders", "--limit", "3")
	expectCode(t, noKey, exitUsage)
	if !strings.Contains(noKey.stderr, "--encryption-key-file") {
		t.Fatalf("peek without the ring does not name --encryption-key-file:\n%s", noKey.stderr)
	}
	dump := runCLI(t, append([]string{"dump", "--data-dir", dataDir, "--stream", "orders"}, key...)...)
	expectCode(t, dump, exitClean)
	if !strings.Contains(dump.stdout, secretMarker+"000399") {
		t.Fatalf("dump with the ring misses the last record")
	}
	expectCode(t, runCLI(t, append([]string{"scrub", "--data-dir", dataDir}, key...)...), exitClean)
	expectCode(t, runCLI(t, append([]string{"scrub", "--data-dir", dataDir}, wrong...)...), exitUsage)
	expectCode(t, runCLI(t, append([]string{"repair", "--data-dir", dataDir, "--apply"}, key...)...), exitClean)
	expectCode(t, runCLI(t, "repair", "--data-dir", dataDir, "--apply"), exitUsage)

	backupDir, restored := filepath.Join(base, "backup"), filepath.Join(base, "restored")
	expectCode(t, runCLI(t, append([]string{"backup", "--data-dir", dataDir, "--out", backupDir}, key...)...), exitClean)
	requireNoPlaintext(t, backupDir)
	expectCode(t, runCLI(t, append([]string{"restore", "--from", backupDir, "--data-dir", restored}, wrong...)...), exitUsage)
	expectCode(t, runCLI(t, append([]string{"restore", "--from", backupDir, "--data-dir", restored}, key...)...), exitClean)
	requireNoPlaintext(t, restored)
	expectCode(t, runCLI(t, append([]string{"verify", "--data-dir", restored}, key...)...), exitClean)

	expectCode(t, runCLI(t, "key", "rotate", ring), exitClean)
	broker = ironbus.Serve(t, "serve", "--data-dir", dataDir, "--addr", "127.0.0.1:0", "--segment-bytes", "64KiB",
		"--encryption-key-file", ring)
	produceSecrets(t, broker.Addr(), 400, 100)
	// The group read the first 400 before the restart; it resumes there.
	stored := readAllRecords(t, broker.Addr())
	if len(stored) != 100 {
		t.Fatalf("after rotation the broker serves %d new records, want 100", len(stored))
	}
	for _, message := range stored {
		if want := fmt.Sprintf("%s%06d-", secretMarker, message.Offset); !strings.HasPrefix(string(message.Payload), want) {
			t.Fatalf("record %d is %.30q, want %s…", message.Offset, message.Payload, want)
		}
	}
	if code := broker.Stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("broker stop exited %d", code)
	}
	requireNoPlaintext(t, dataDir)
	verify = runCLI(t, append([]string{"verify", "--data-dir", dataDir, "--json"}, key...)...)
	expectCode(t, verify, exitClean)
	if ids := keyIDsOf(t, verify); !slices.Equal(ids, []uint32{1, 2}) {
		t.Fatalf("after rotation verify lists key ids %v, want [1 2]", ids)
	}
	dump = runCLI(t, append([]string{"dump", "--data-dir", dataDir, "--stream", "orders"}, key...)...)
	expectCode(t, dump, exitClean)
	for _, want := range []string{secretMarker + "000000", secretMarker + "000399", secretMarker + "000499"} {
		if !strings.Contains(dump.stdout, want) {
			t.Fatalf("after rotation dump misses %s: records under the old key must stay readable", want)
		}
	}
}
