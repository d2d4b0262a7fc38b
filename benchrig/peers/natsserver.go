package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsSyncInterval is what `sync_interval: always` sets besides SyncAlways
// (the server's configuration parser does the same); with SyncAlways off
// the server uses the same 2-minute flush timer by default.
const natsSyncInterval = 2 * time.Minute

// benchStreamSubject is the one subject every JetStream produce row uses.
const benchStreamSubject = "bench"

// natsServer is an embedded nats-server with JetStream file storage in a
// directory of its own on the measured disk.
type natsServer struct {
	server   *server.Server
	storeDir string
	owned    bool // remove storeDir on stop
}

// startNATS starts a server on 127.0.0.1 and a random port. always picks
// `sync_interval: always` (fsync before every ack); otherwise the server's
// default (acks from the page cache, flushed every 2 minutes). An empty
// storeDir makes a fresh one under dir, removed on stop.
func startNATS(dir, storeDir string, always bool) (*natsServer, error) {
	owned := storeDir == ""
	if owned {
		var err error
		if storeDir, err = os.MkdirTemp(dir, "peers-nats-"); err != nil {
			return nil, err
		}
	}
	options := &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		NoLog:     true,
		NoSigs:    true,
		JetStream: true,
		StoreDir:  storeDir,
	}
	if always {
		options.SyncAlways, options.SyncInterval = true, natsSyncInterval
	}
	ns, err := server.NewServer(options)
	if err != nil {
		return nil, cleanupStore(storeDir, owned, err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, cleanupStore(storeDir, owned, errors.New("nats-server did not become ready in 10 s"))
	}
	return &natsServer{server: ns, storeDir: storeDir, owned: owned}, nil
}

func cleanupStore(storeDir string, owned bool, err error) error {
	if owned {
		_ = os.RemoveAll(storeDir)
	}
	return err
}

// stop shuts the server down (JetStream flushes its stores) and removes
// its directory when it made it.
func (n *natsServer) stop() {
	n.server.Shutdown()
	n.server.WaitForShutdown()
	if n.owned {
		_ = os.RemoveAll(n.storeDir)
	}
}

func (n *natsServer) url() string { return n.server.ClientURL() }

// benchStreamConfig is the stream every JetStream row writes to: file
// storage, one replica, limits retention with no limits, so nothing is
// discarded during a run. The report prints it.
func benchStreamConfig(name string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:      name,
		Subjects:  []string{benchStreamSubject},
		Storage:   jetstream.FileStorage,
		Replicas:  1,
		Retention: jetstream.LimitsPolicy,
		Discard:   jetstream.DiscardOld,
	}
}

// freshStream deletes the stream if it exists and creates it again, so
// every row starts on an empty store, like IronBus's fresh streams.
func (n *natsServer) freshStream(name string) error {
	nc, err := nats.Connect(n.url(), nats.Name("peers-admin"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete stream %s: %w", name, err)
	}
	if _, err := js.CreateStream(ctx, benchStreamConfig(name)); err != nil {
		return fmt.Errorf("create stream %s: %w", name, err)
	}
	return nil
}
