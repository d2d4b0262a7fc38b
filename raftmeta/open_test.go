package raftmeta

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOpenRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Incarnation: 1, DataDir: "d", ClusterAddr: "a:1"},
		{NodeID: 1, DataDir: "d", ClusterAddr: "a:1"},
		{NodeID: 1, Incarnation: 1, ClusterAddr: "a:1"},
		{NodeID: 1, Incarnation: 1, DataDir: "d"},
		{NodeID: 1, Incarnation: 1, DataDir: "d", ClusterAddr: "a:1", Peers: map[uint32]string{0: "b:1"}},
	} {
		if _, err := Open(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// A second member on the same store fails to open and closes the layer
// it was handed.
func TestOpenTwiceFails(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Meta, StreamLayer, error) {
		layer, err := ListenTCP("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m, err := Open(Config{NodeID: 1, Incarnation: 1, DataDir: dir, Layer: layer, Logger: testLogger(), Timeouts: testTimeouts})
		return m, layer, err
	}
	first, _, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.Bootstrap(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bootstrap without this node among the peers: %v", err)
	}
	start := time.Now()
	if _, layer, err := open(); err == nil {
		t.Fatal("a second member opened the same store")
	} else if _, dialErr := net.DialTimeout("tcp", layer.Addr().String(), time.Second); dialErr == nil {
		t.Fatalf("the layer of a failed open still listens (%v)", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the second open hung")
	}
}

// A store made under another identity is moved aside, not reused.
func TestForeignStoreMovedAside(t *testing.T) {
	dir := t.TempDir()
	meta := filepath.Join(dir, MetaDirName)
	logger := testLogger()
	if err := claimDir(meta, 1, 0xaa, logger); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(meta, "raft.db"), []byte("old vote"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := claimDir(meta, 1, 0xaa, logger); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(meta, "raft.db")); err != nil {
		t.Fatalf("own store not kept: %v", err)
	}
	for range 2 {
		if err := claimDir(meta, 1, 0xbb, logger); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(meta, "raft.db"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := claimDir(meta, 1, 0xaa, logger); err != nil {
			t.Fatal(err)
		}
	}
	for _, aside := range []string{"meta.foreign-000000aa", "meta.foreign-000000bb", "meta.foreign-000000bb-1"} {
		if _, err := os.Stat(filepath.Join(dir, aside, "raft.db")); err != nil {
			t.Errorf("%s: %v", aside, err)
		}
	}
	// A store with no identity file at all is someone else's too.
	if err := os.WriteFile(filepath.Join(meta, "raft.db"), []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(meta, identityFileName)); err != nil {
		t.Fatal(err)
	}
	if err := claimDir(meta, 1, 0xaa, logger); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "meta.foreign-00000000", "raft.db")); err != nil {
		t.Fatalf("store without identity not moved aside: %v", err)
	}
}
