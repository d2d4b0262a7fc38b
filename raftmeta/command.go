package raftmeta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/ironbus/ironbus/broker/catalog"
	"github.com/ironbus/ironbus/replica"
	"github.com/ironbus/ironbus/segment"
)

// Commands are encoded as one version byte and a JSON envelope
// {"op": name, "body": fields}. JSON costs nothing that matters at
// metadata rates and reads well in a dumped log. A decoder refuses a
// newer version byte (ErrNewerVersion), unknown operations and fields,
// and fields that fail validation (ErrMalformed, ErrInvalid), so what
// Apply sees has passed the same checks the proposer ran.
const (
	// CommandVersion is the version byte of the commands this binary
	// writes and the newest it reads.
	CommandVersion = 1
	// MaxCommandBytes bounds one encoded command (settings blobs
	// included).
	MaxCommandBytes = 1 << 20
	maxNameBytes    = 255
	maxAddressBytes = 255
	maxTags         = 64
	maxKindBytes    = 32
	maxReplicas     = 7
)

// Command is one change to the metadata.
type Command interface {
	// Op is the command's name in the encoding.
	Op() string
	validate() error
}

// InitCluster sets the cluster id, once.
type InitCluster struct {
	ClusterID uint64 `json:"cluster_id"`
}

// RegisterNode adds a node or updates its addresses and tags. A known
// node with a new incarnation becomes a new replica identity: every
// desired set naming its old replica id names the new one instead, with
// its version raised, so the partitions add it as a new member.
type RegisterNode struct {
	Node Node `json:"node"`
}

// RemoveNode starts a node's removal: it takes no new replicas, and each
// desired set naming it moves to another active node where one is free.
type RemoveNode struct {
	Node uint32 `json:"node"`
}

// ForgetNode deletes a node no desired set names any more.
type ForgetNode struct {
	Node uint32 `json:"node"`
}

// CreateStream creates a stream and places its partitions' replicas.
type CreateStream struct {
	Name              string `json:"name"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Settings          []byte `json:"settings,omitempty"`
}

// DeleteStream deletes a stream and its consumer groups.
type DeleteStream struct {
	Name string `json:"name"`
}

// SetReplicaSet replaces a partition's desired replica set when its
// config version is still ExpectVersion.
type SetReplicaSet struct {
	Stream        string              `json:"stream"`
	Partition     uint32              `json:"partition"`
	Replicas      []replica.ReplicaID `json:"replicas"`
	ExpectVersion uint64              `json:"expect_version"`
}

// CreateGroup defines a consumer group.
type CreateGroup struct {
	Group Group `json:"group"`
}

// DeleteGroup deletes a consumer-group definition.
type DeleteGroup struct {
	Stream string `json:"stream"`
	Name   string `json:"name"`
}

// BumpACLVersion raises the account/ACL version, telling every node to
// reload them.
type BumpACLVersion struct{}

func (InitCluster) Op() string    { return "init_cluster" }
func (RegisterNode) Op() string   { return "register_node" }
func (RemoveNode) Op() string     { return "remove_node" }
func (ForgetNode) Op() string     { return "forget_node" }
func (CreateStream) Op() string   { return "create_stream" }
func (DeleteStream) Op() string   { return "delete_stream" }
func (SetReplicaSet) Op() string  { return "set_replica_set" }
func (CreateGroup) Op() string    { return "create_group" }
func (DeleteGroup) Op() string    { return "delete_group" }
func (BumpACLVersion) Op() string { return "bump_acl_version" }

// newCommand returns an empty command of the named operation.
func newCommand(op string) Command {
	switch op {
	case "init_cluster":
		return &InitCluster{}
	case "register_node":
		return &RegisterNode{}
	case "remove_node":
		return &RemoveNode{}
	case "forget_node":
		return &ForgetNode{}
	case "create_stream":
		return &CreateStream{}
	case "delete_stream":
		return &DeleteStream{}
	case "set_replica_set":
		return &SetReplicaSet{}
	case "create_group":
		return &CreateGroup{}
	case "delete_group":
		return &DeleteGroup{}
	case "bump_acl_version":
		return &BumpACLVersion{}
	}
	return nil
}

type envelope struct {
	Op   string          `json:"op"`
	Body json.RawMessage `json:"body"`
}

// EncodeCommand validates and encodes a command.
func EncodeCommand(c Command) ([]byte, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: no command", ErrInvalid)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, c.Op(), err)
	}
	env, err := json.Marshal(envelope{Op: c.Op(), Body: body})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, c.Op(), err)
	}
	if 1+len(env) > MaxCommandBytes {
		return nil, fmt.Errorf("%w: %s takes %d bytes, more than %d", ErrInvalid, c.Op(), 1+len(env), MaxCommandBytes)
	}
	return append([]byte{CommandVersion}, env...), nil
}

// DecodeCommand decodes and validates a command; the result is a pointer
// to one of the command types.
func DecodeCommand(data []byte) (Command, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if len(data) > MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(data), MaxCommandBytes)
	}
	switch version := data[0]; {
	case version > CommandVersion:
		return nil, fmt.Errorf("%w: command version %d, this binary reads up to %d", ErrNewerVersion, version, CommandVersion)
	case version == 0:
		return nil, fmt.Errorf("%w: command version 0", ErrMalformed)
	}
	var env envelope
	if err := strictJSON(data[1:], &env); err != nil {
		return nil, fmt.Errorf("%w: envelope: %w", ErrMalformed, err)
	}
	c := newCommand(env.Op)
	if c == nil {
		return nil, fmt.Errorf("%w: unknown operation %q", ErrMalformed, env.Op)
	}
	if len(env.Body) == 0 {
		return nil, fmt.Errorf("%w: %s without a body", ErrMalformed, env.Op)
	}
	if err := strictJSON(env.Body, c); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, env.Op, err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func strictJSON(data []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

func (c InitCluster) validate() error {
	if c.ClusterID == 0 {
		return fmt.Errorf("%w: cluster id 0", ErrInvalid)
	}
	return nil
}

func (c RegisterNode) validate() error {
	n := c.Node
	if n.ID == 0 || n.Incarnation == 0 {
		return fmt.Errorf("%w: node %d incarnation %d (both must be nonzero)", ErrInvalid, n.ID, n.Incarnation)
	}
	if n.State != 0 && n.State != NodeActive {
		return fmt.Errorf("%w: a node registers active, not %s", ErrInvalid, n.State)
	}
	if err := checkAddress("cluster address", n.ClusterAddr, true); err != nil {
		return err
	}
	if err := checkAddress("client address", n.ClientAddr, false); err != nil {
		return err
	}
	if len(n.Tags) > maxTags {
		return fmt.Errorf("%w: %d tags, at most %d", ErrInvalid, len(n.Tags), maxTags)
	}
	for k, v := range n.Tags {
		if err := checkName("tag", k); err != nil {
			return err
		}
		if len(v) > maxNameBytes {
			return fmt.Errorf("%w: tag %q value longer than %d bytes", ErrInvalid, k, maxNameBytes)
		}
	}
	return nil
}

func (c RemoveNode) validate() error { return checkNodeID(c.Node) }
func (c ForgetNode) validate() error { return checkNodeID(c.Node) }

func (c CreateStream) validate() error {
	if err := segment.ValidateStreamName(c.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if c.Partitions < 1 || c.Partitions > catalog.MaxPartitions {
		return fmt.Errorf("%w: %d partitions (1..%d)", ErrInvalid, c.Partitions, catalog.MaxPartitions)
	}
	if c.ReplicationFactor < 1 || c.ReplicationFactor > maxReplicas {
		return fmt.Errorf("%w: replication factor %d (1..%d)", ErrInvalid, c.ReplicationFactor, maxReplicas)
	}
	return nil
}

func (c DeleteStream) validate() error {
	if err := segment.ValidateStreamName(c.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func (c SetReplicaSet) validate() error {
	if err := segment.ValidateStreamName(c.Stream); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(c.Replicas) < 1 || len(c.Replicas) > maxReplicas {
		return fmt.Errorf("%w: %d replicas (1..%d)", ErrInvalid, len(c.Replicas), maxReplicas)
	}
	seen := map[uint32]bool{}
	for _, r := range c.Replicas {
		if r.Node() == 0 || r.Incarnation() == 0 {
			return fmt.Errorf("%w: replica id %#x", ErrInvalid, uint64(r))
		}
		if seen[r.Node()] {
			return fmt.Errorf("%w: node %d twice in one replica set", ErrInvalid, r.Node())
		}
		seen[r.Node()] = true
	}
	return nil
}

func (c CreateGroup) validate() error {
	g := c.Group
	if err := segment.ValidateStreamName(g.Stream); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := checkName("group name", g.Name); err != nil {
		return err
	}
	if g.Kind == "" || len(g.Kind) > maxKindBytes {
		return fmt.Errorf("%w: group kind %q", ErrInvalid, g.Kind)
	}
	return nil
}

func (c DeleteGroup) validate() error {
	if err := segment.ValidateStreamName(c.Stream); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return checkName("group name", c.Name)
}

func (BumpACLVersion) validate() error { return nil }

func checkNodeID(id uint32) error {
	if id == 0 {
		return fmt.Errorf("%w: node id 0", ErrInvalid)
	}
	return nil
}

func checkName(what, name string) error {
	if name == "" || len(name) > maxNameBytes {
		return fmt.Errorf("%w: %s %q (1..%d bytes)", ErrInvalid, what, name, maxNameBytes)
	}
	if strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) {
		return fmt.Errorf("%w: %s %q has a control or invalid character", ErrInvalid, what, name)
	}
	return nil
}

func checkAddress(what, addr string, required bool) error {
	if addr == "" && !required {
		return nil
	}
	if addr == "" || len(addr) > maxAddressBytes || strings.ContainsFunc(addr, unicode.IsSpace) {
		return fmt.Errorf("%w: %s %q", ErrInvalid, what, addr)
	}
	return nil
}
