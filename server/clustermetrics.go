package server

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ironbus/ironbus/replica"
)

// clusterCollector exposes the cluster door's state on /metrics: per
// replicated partition this node holds, its leader, term, commit and
// watermark, leader changes and each peer replica's lag (on the leader);
// per peer node, whether the peer link reaches it and what it dropped;
// the metadata group's leader.
type clusterCollector struct {
	cluster *clusterListener

	leader, isLeader, term, commit, watermark, changes, stopped, lag *prometheus.Desc
	peerUp, peerDropped, metaLeader                                  *prometheus.Desc
}

func newClusterCollector(c *clusterListener) *clusterCollector {
	partition := []string{"stream", "partition"}
	return &clusterCollector{cluster: c,
		leader:    prometheus.NewDesc("ironbus_replica_leader_node", "The node leading the partition (0: none known).", partition, nil),
		isLeader:  prometheus.NewDesc("ironbus_replica_is_leader", "1 when this node leads the partition and takes its appends.", partition, nil),
		term:      prometheus.NewDesc("ironbus_replica_term", "The partition's Raft term as this node knows it.", partition, nil),
		commit:    prometheus.NewDesc("ironbus_replica_commit_index", "The partition's Raft commit index as this node knows it.", partition, nil),
		watermark: prometheus.NewDesc("ironbus_replica_watermark", "The offset after the partition's last committed record on this node.", partition, nil),
		changes:   prometheus.NewDesc("ironbus_replica_leader_changes_total", "Changes of the partition's leader this node has seen since it started.", partition, nil),
		stopped:   prometheus.NewDesc("ironbus_replica_stopped", "1 when this node's replica stopped: reason latched (a storage failure) or damaged (a damaged entry).", append(partition, "reason"), nil),
		lag:       prometheus.NewDesc("ironbus_replica_lag_entries", "On the leader: how many committed entries a replica has not yet acknowledged.", append(partition, "replica_node"), nil),
		peerUp:    prometheus.NewDesc("ironbus_cluster_peer_connected", "1 when the peer link to the node is connected.", []string{"peer"}, nil),
		peerDropped: prometheus.NewDesc("ironbus_cluster_peer_messages_dropped_total",
			"Messages to the node dropped (queue full, or lost with a failed connection); Raft resends.", []string{"peer"}, nil),
		metaLeader: prometheus.NewDesc("ironbus_cluster_meta_leader_node", "The node leading the metadata group (0: none known).", nil, nil),
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.isLeader, c.term, c.commit, c.watermark, c.changes, c.stopped, c.lag,
		c.peerUp, c.peerDropped, c.metaLeader} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	cl := c.cluster
	leader, _ := cl.meta.Leader()
	ch <- prometheus.MustNewConstMetric(c.metaLeader, prometheus.GaugeValue, float64(leader))
	for _, p := range cl.link.Status().Peers {
		peer := strconv.FormatUint(uint64(p.Node), 10)
		connected := 0.0
		if p.Connected {
			connected = 1
		}
		ch <- prometheus.MustNewConstMetric(c.peerUp, prometheus.GaugeValue, connected, peer)
		ch <- prometheus.MustNewConstMetric(c.peerDropped, prometheus.CounterValue, float64(p.MessagesDropped), peer)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	state := cl.meta.State()
	for name, stream := range state.Streams {
		for index, part := range stream.Partitions {
			status, err := cl.host.Status(ctx, part.Group)
			if err != nil {
				continue
			}
			c.collectPartition(ch, name, strconv.Itoa(index), status)
		}
	}
}

func (c *clusterCollector) collectPartition(ch chan<- prometheus.Metric, stream, partition string, s replica.Status) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{stream, partition}, labels...)...)
	}
	leads := 0.0
	if s.Role == replica.RoleLeader {
		leads = 1
	}
	gauge(c.leader, float64(s.Leader.Node()))
	gauge(c.isLeader, leads)
	gauge(c.term, float64(s.Term))
	gauge(c.commit, float64(s.Commit))
	gauge(c.watermark, float64(s.Watermark))
	ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(s.LeaderChanges), stream, partition)
	latched, damaged := 0.0, 0.0
	if s.Latched != nil {
		latched = 1
	}
	if s.Damaged != nil {
		damaged = 1
	}
	gauge(c.stopped, latched, "latched")
	gauge(c.stopped, damaged, "damaged")
	if s.Role != replica.RoleLeader {
		return
	}
	for id, match := range s.Match {
		if id != s.ID {
			gauge(c.lag, float64(s.Commit-min(match, s.Commit)), strconv.FormatUint(uint64(id.Node()), 10))
		}
	}
}
