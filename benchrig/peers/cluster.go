package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/server"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// The cluster suite (-suite cluster): three IronBus nodes with a
// replicated partition (3 replicas) against three JetStream servers with
// an R3 stream, all on this machine's loopback and disk, one side after
// the other.
//
//   - R-P1: one connection producing one 256 B record at a time, each
//     awaited: an IronBus ack means stored and fdatasynced on a majority;
//     JetStream with `sync_interval: always` fsyncs every write on each
//     server before it counts towards the majority.
//   - R-P2b: eight producers, pipelined, 512 in flight each.
//   - R-P1-p50: the median latency of R-P1's produces against the same
//     loop on a single IronBus node (what replication adds to one ack).
//   - R-C1: 200,000 stored records consumed: a work group with explicit
//     acks and a streaming read on IronBus (from the node the seed list
//     reaches first), a pull consumer with explicit acks and an ordered
//     consumer on JetStream.
//
// Both sides run in this process, as the main table's do: three brokers
// on one machine share its two cores, which a real cluster would not.

const (
	clusterSize   = 3
	clusterWindow = manyWindow
	// clusterReady bounds the wait for a cluster to elect its leaders and
	// take its first stream.
	clusterReady = 30 * time.Second
)

// Durability labels of the cluster suite.
const (
	labelIronBusR3          = "ironbus-r3"
	labelJetStreamR3Always  = "jetstream-r3-always"
	labelJetStreamR3Default = "jetstream-r3-default"
)

// clusterRowSpecs declares the cluster suite's table; the targets are
// the issue's.
func clusterRowSpecs(cfg *config) []rowSpec {
	const size = 256
	pair := func(id, title string, peer string, target float64, cross bool) rowSpec {
		return rowSpec{id: id, title: title, payload: size, unit: "msg/s", target: target, crossDurability: cross,
			ironbus: metric{labelIronBusR3, id, size}, peer: metric{peer, id, size}}
	}
	note := fmt.Sprintf("%d stored 256 B records, loaded through one pipelined producer on each side; %d consumers each side",
		cfg.consumeMessages, cfg.consumers)
	return []rowSpec{
		pair("R-P1", "awaited produce, 1 connection, 3 replicas", labelJetStreamR3Always, 4, false),
		pair("R-P2b", "8 producers, pipelined, window 512 each, 3 replicas", labelJetStreamR3Always, 10, false),
		pair("R-P1", "R-P1: IronBus R3 fsynced vs JetStream R3 unsynced", labelJetStreamR3Default, 0, true),
		pair("R-P2b", "R-P2b: IronBus R3 fsynced vs JetStream R3 unsynced", labelJetStreamR3Default, 2, true),
		{id: "R-P1-p50", title: "R-P1 ack latency p50: IronBus R3 vs IronBus single node", payload: size, unit: "µs",
			lowerIsBetter: true, target: 2, crossDurability: true,
			ironbus: metric{labelIronBusR3, "P1-p50", size}, peer: metric{labelIronBus, "P1-p50", size}},
		{id: "R-C1-work", title: "work group, Fetch 1,000 + AckRange vs JetStream R3 pull, explicit acks",
			payload: consumePayload, unit: "msg/s", note: note,
			ironbus: metric{labelIronBusR3, "C1-work", consumePayload}, peer: metric{labelJetStreamR3Always, "C1-work", consumePayload}},
		{id: "R-C1-stream", title: "streaming read vs JetStream R3 ordered consumer", payload: consumePayload, unit: "msg/s",
			note:    consumeStreamAPI + ". " + note,
			ironbus: metric{labelIronBusR3, "C1-stream", consumePayload}, peer: metric{labelJetStreamR3Always, "C1-stream", consumePayload}},
	}
}

// measureCluster runs the cluster suite once.
func measureCluster(cfg *config, measured samples) error {
	phases := []struct {
		name string
		run  func(*config, samples) error
	}{
		{"ironbus single node P1", ironbusSingleP1Phase},
		{"ironbus cluster", ironbusClusterPhase},
		{"jetstream cluster always", func(cfg *config, measured samples) error { return jetstreamClusterPhase(cfg, measured, true) }},
		{"jetstream cluster default", func(cfg *config, measured samples) error { return jetstreamClusterPhase(cfg, measured, false) }},
	}
	for _, phase := range phases {
		began := time.Now()
		if err := phase.run(cfg, measured); err != nil {
			return fmt.Errorf("%s: %w", phase.name, err)
		}
		progress("  %s done in %.1f s", phase.name, time.Since(began).Seconds())
	}
	return nil
}

func ironbusSingleP1Phase(cfg *config, measured samples) error {
	broker, err := startIronBus(cfg.dir)
	if err != nil {
		return err
	}
	defer broker.stop()
	cfg.backend = broker.backend
	latencies, err := ironbusAwaitedLatencies(broker.addr, "single-p1", 256, cfg.duration)
	if err != nil {
		return err
	}
	measured.add(metric{labelIronBus, "P1-p50", 256}, percentile(latencies, 0.5))
	return nil
}

func ironbusClusterPhase(cfg *config, measured samples) error {
	cluster, err := startIronBusCluster(cfg.dir)
	if err != nil {
		return err
	}
	defer cluster.stop()
	seeds := cluster.seeds()
	if err := cluster.createStream("r-p1"); err != nil {
		return err
	}
	latencies, err := ironbusAwaitedLatencies(seeds, "r-p1", 256, cfg.duration)
	if err != nil {
		return fmt.Errorf("R-P1: %w", err)
	}
	measured.add(metric{labelIronBusR3, "R-P1", 256}, float64(len(latencies))/cfg.duration.Seconds())
	measured.add(metric{labelIronBusR3, "P1-p50", 256}, percentile(latencies, 0.5))
	if err := cluster.createStream("r-p2b"); err != nil {
		return err
	}
	result, err := ironbusPipelined(seeds, "r-p2b", manyProducers, clusterWindow, 256, cfg.duration)
	if err != nil {
		return fmt.Errorf("R-P2b: %w", err)
	}
	measured.add(metric{labelIronBusR3, "R-P2b", 256}, result.perSecond())
	if err := cluster.createStream("c1"); err != nil {
		return err
	}
	work, stream, err := ironbusConsumeRows(cfg, seeds)
	if err != nil {
		return err
	}
	measured.add(metric{labelIronBusR3, "C1-work", consumePayload}, work.perSecond())
	measured.add(metric{labelIronBusR3, "C1-stream", consumePayload}, stream.perSecond())
	return nil
}

// ironbusAwaitedLatencies is P1 with each produce's latency kept: one
// connection, one record in flight, until duration has passed.
func ironbusAwaitedLatencies(addr, stream string, size int, duration time.Duration) ([]time.Duration, error) {
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{ClientName: "peers-p1", Window: 1, Compression: client.CompressNone})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	record := client.Record{Payload: payloadOf(size)}
	var latencies []time.Duration
	for stopAt := time.Now().Add(duration); time.Now().Before(stopAt); {
		began := time.Now()
		if _, err := c.Produce(ctx, stream, record); err != nil {
			return nil, err
		}
		latencies = append(latencies, time.Since(began))
	}
	return latencies, nil
}

// ironbusCluster is three in-process IronBus nodes, each with its own
// data directory under the measured one, founding one cluster.
type ironbusCluster struct {
	servers []*server.Server
	dirs    []string
}

func startIronBusCluster(dir string) (*ironbusCluster, error) {
	clusterAddrs, err := freeLoopbackAddrs(clusterSize)
	if err != nil {
		return nil, err
	}
	peers := map[uint32]string{}
	for i, addr := range clusterAddrs {
		peers[uint32(i+1)] = addr
	}
	c := &ironbusCluster{}
	for i := range clusterSize {
		dataDir, err := os.MkdirTemp(dir, "peers-cluster-")
		if err != nil {
			c.stop()
			return nil, err
		}
		c.dirs = append(c.dirs, dataDir)
		cfg := server.DefaultConfig()
		cfg.DataDir, cfg.Addr, cfg.HealthAddr, cfg.Owner = dataDir, "127.0.0.1:0", server.HealthOff, "peers"
		cfg.IOMode = "buffered" // as the main table's IronBus (ironbusproduce.go)
		cfg.NodeID, cfg.ClusterAddr, cfg.Peers = uint32(i+1), clusterAddrs[i], peers
		srv, err := server.New(cfg)
		if err == nil {
			if err = srv.Start(context.Background()); err != nil {
				_ = srv.Stop(context.Background())
			}
		}
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
		c.servers = append(c.servers, srv)
	}
	return c, nil
}

func (c *ironbusCluster) seeds() string {
	seeds := ""
	for i, srv := range c.servers {
		if i > 0 {
			seeds += ","
		}
		seeds += srv.Addr()
	}
	return seeds
}

// createStream makes a one-partition stream with three replicas and
// waits until its partition has a leader: the first produce then
// measures replication, not the election.
func (c *ironbusCluster) createStream(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterReady)
	defer cancel()
	conn, err := client.Dial(ctx, c.seeds(), client.Options{ClientName: "peers-admin"})
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		_, err := conn.CreateStream(ctx, name, client.StreamSettings{Partitions: 1, Replicas: clusterSize})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("create stream %s: %w", name, err)
		}
		time.Sleep(100 * time.Millisecond) // the metadata group is still electing
	}
	for {
		state, err := conn.ClusterInfo(ctx, client.ClusterInfoOptions{Partitions: true, Stream: name})
		if err == nil && len(state.Partitions) > 0 && state.Partitions[0].Leader != 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("stream %s has no leader after %v", name, clusterReady)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *ironbusCluster) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, srv := range c.servers {
		_ = srv.Stop(ctx)
	}
	for _, dir := range c.dirs {
		_ = os.RemoveAll(dir)
	}
}

// freeLoopbackAddrs reserves n loopback ports by binding and releasing
// them: a cluster's members must know each other's addresses before any
// of them starts.
func freeLoopbackAddrs(n int) ([]string, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

func jetstreamClusterPhase(cfg *config, measured samples, always bool) error {
	label := labelJetStreamR3Default
	if always {
		label = labelJetStreamR3Always
	}
	cluster, err := startNATSCluster(cfg.dir, always)
	if err != nil {
		return err
	}
	defer cluster.stop()
	url := cluster.servers[0].ClientURL()
	if err := cluster.freshStream("BENCH"); err != nil {
		return err
	}
	result, err := natsAwaited(url, 1, 256, cfg.duration)
	if err != nil {
		return fmt.Errorf("R-P1: %w", err)
	}
	measured.add(metric{label, "R-P1", 256}, result.perSecond())
	if err := cluster.freshStream("BENCH"); err != nil {
		return err
	}
	if result, err = natsPipelined(url, manyProducers, clusterWindow, 256, cfg.duration); err != nil {
		return fmt.Errorf("R-P2b: %w", err)
	}
	measured.add(metric{label, "R-P2b", 256}, result.perSecond())
	if !always {
		return nil
	}
	return jetstreamClusterConsume(cfg, measured, cluster)
}

// jetstreamClusterConsume is R-C1 on the JetStream cluster (always): the
// records are loaded by async publish and then read.
func jetstreamClusterConsume(cfg *config, measured samples, cluster *natsCluster) error {
	url := cluster.servers[0].ClientURL()
	if err := cluster.deleteStream("BENCH"); err != nil {
		return err
	}
	if err := cluster.freshStream(consumeStreamName); err != nil {
		return err
	}
	count := uint64(cfg.consumeMessages)
	var acked atomic.Uint64
	if _, err := natsPipelinedCount(url, count, &acked); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	work, err := natsWorkConsume(url, cfg.consumers, count)
	if err != nil {
		return fmt.Errorf("pull consumer: %w", err)
	}
	measured.add(metric{labelJetStreamR3Always, "C1-work", consumePayload}, work.perSecond())
	stream, err := natsOrderedConsume(url, count)
	if err != nil {
		return fmt.Errorf("ordered consumer: %w", err)
	}
	measured.add(metric{labelJetStreamR3Always, "C1-stream", consumePayload}, stream.perSecond())
	return nil
}

// natsPipelinedCount publishes count consume-sized messages through one
// async publisher and waits for every PubAck.
func natsPipelinedCount(url string, count uint64, acked *atomic.Uint64) (uint64, error) {
	nc, js, err := connectJetStream(url, jetstream.WithPublishAsyncMaxPending(singleWindow))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	payload := payloadOf(consumePayload)
	for range count {
		if _, err := js.PublishAsync(benchStreamSubject, payload, jetstream.WithStallWait(natsStallWait)); err != nil {
			return acked.Load(), err
		}
	}
	return count, awaitAsyncComplete(js)
}

// natsCluster is three in-process nats-servers with JetStream, routed
// to each other as one cluster.
type natsCluster struct {
	servers []*natsserver.Server
	dirs    []string
}

func startNATSCluster(dir string, always bool) (*natsCluster, error) {
	routeAddrs, err := freeLoopbackAddrs(clusterSize)
	if err != nil {
		return nil, err
	}
	var routes []*url.URL
	for _, addr := range routeAddrs {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: addr})
	}
	c := &natsCluster{}
	for i := range clusterSize {
		storeDir, err := os.MkdirTemp(dir, "peers-nats-cluster-")
		if err != nil {
			c.stop()
			return nil, err
		}
		c.dirs = append(c.dirs, storeDir)
		_, portText, _ := net.SplitHostPort(routeAddrs[i])
		port, _ := strconv.Atoi(portText)
		options := &natsserver.Options{
			ServerName: "n" + strconv.Itoa(i+1),
			Host:       "127.0.0.1",
			Port:       natsserver.RANDOM_PORT,
			NoLog:      true,
			NoSigs:     true,
			JetStream:  true,
			StoreDir:   filepath.Join(storeDir, "js"),
			Cluster:    natsserver.ClusterOpts{Name: "peers", Host: "127.0.0.1", Port: port},
			Routes:     routes,
		}
		if always {
			options.SyncAlways, options.SyncInterval = true, natsSyncInterval
		}
		ns, err := natsserver.NewServer(options)
		if err != nil {
			c.stop()
			return nil, err
		}
		go ns.Start()
		c.servers = append(c.servers, ns)
	}
	for _, ns := range c.servers {
		if !ns.ReadyForConnections(10 * time.Second) {
			c.stop()
			return nil, errors.New("nats-server did not become ready in 10 s")
		}
	}
	return c, nil
}

// freshStream (re)creates an R3 stream on subject bench, retrying while
// the JetStream meta group elects its leader.
func (c *natsCluster) freshStream(name string) error {
	if err := c.deleteStream(name); err != nil {
		return err
	}
	config := benchStreamConfig(name)
	config.Replicas = clusterSize
	return c.withJetStream(func(ctx context.Context, js jetstream.JetStream) error {
		_, err := js.CreateStream(ctx, config)
		return err
	})
}

func (c *natsCluster) deleteStream(name string) error {
	return c.withJetStream(func(ctx context.Context, js jetstream.JetStream) error {
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return err
		}
		return nil
	})
}

// withJetStream runs call against the cluster until it succeeds or
// clusterReady passes: right after start the meta group has no leader.
func (c *natsCluster) withJetStream(call func(context.Context, jetstream.JetStream) error) error {
	nc, js, err := connectJetStream(c.servers[0].ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReady)
	defer cancel()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 5*time.Second)
		err := call(attempt, js)
		cancelAttempt()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *natsCluster) stop() {
	for _, ns := range c.servers {
		ns.Shutdown()
	}
	for _, ns := range c.servers {
		ns.WaitForShutdown()
	}
	for _, dir := range c.dirs {
		_ = os.RemoveAll(dir)
	}
}
