package raftmeta

import (
	"errors"
	"reflect"
	"testing"

	"github.com/ironbus/ironbus/replica"
)

func sampleCommands() []Command {
	return []Command{
		&InitCluster{ClusterID: 0xfeed},
		&RegisterNode{Node: Node{ID: 2, Incarnation: 0xabcd, ClientAddr: "127.0.0.1:7002", ClusterAddr: "127.0.0.1:8002", Tags: map[string]string{"zone": "a"}}},
		&RemoveNode{Node: 2},
		&ForgetNode{Node: 2},
		&CreateStream{Name: "orders", Partitions: 4, ReplicationFactor: 3, Settings: []byte(`{"max_age":"1h"}`)},
		&DeleteStream{Name: "orders"},
		&SetReplicaSet{Stream: "orders", Partition: 1, Replicas: []replica.ReplicaID{replica.NewReplicaID(1, 9), replica.NewReplicaID(3, 7)}, ExpectVersion: 4},
		&CreateGroup{Group: Group{Name: "billing", Stream: "orders", Kind: "work", Settings: []byte{1, 2}}},
		&DeleteGroup{Stream: "orders", Name: "billing"},
		&BumpACLVersion{},
	}
}

func TestCommandsRoundTrip(t *testing.T) {
	for _, c := range sampleCommands() {
		data, err := EncodeCommand(c)
		if err != nil {
			t.Fatalf("%s: %v", c.Op(), err)
		}
		got, err := DecodeCommand(data)
		if err != nil {
			t.Fatalf("%s: %v (%q)", c.Op(), err, data)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("%s: decoded %#v, want %#v", c.Op(), got, c)
		}
	}
}

func TestDecodeRefusesTyped(t *testing.T) {
	good, _ := EncodeCommand(&DeleteStream{Name: "orders"})
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"version 0", append([]byte{0}, good[1:]...), ErrMalformed},
		{"newer", append([]byte{CommandVersion + 1}, good[1:]...), ErrNewerVersion},
		{"not json", []byte{1, '{'}, ErrMalformed},
		{"unknown op", []byte("\x01{\"op\":\"launch\",\"body\":{}}"), ErrMalformed},
		{"no body", []byte("\x01{\"op\":\"delete_stream\"}"), ErrMalformed},
		{"unknown field", []byte("\x01{\"op\":\"delete_stream\",\"body\":{\"name\":\"a\",\"force\":true}}"), ErrMalformed},
		{"trailing", append(append([]byte{}, good...), []byte(" {}")...), ErrMalformed},
		{"bad name", []byte("\x01{\"op\":\"delete_stream\",\"body\":{\"name\":\"../x\"}}"), ErrInvalid},
		{"factor 0", []byte("\x01{\"op\":\"create_stream\",\"body\":{\"name\":\"a\",\"partitions\":1,\"replication_factor\":0}}"), ErrInvalid},
		{"node twice", []byte("\x01{\"op\":\"set_replica_set\",\"body\":{\"stream\":\"a\",\"partition\":0,\"replicas\":[4294967297,4294967298],\"expect_version\":1}}"), ErrInvalid},
		{"incarnation 0", []byte("\x01{\"op\":\"register_node\",\"body\":{\"node\":{\"id\":1,\"incarnation\":0,\"cluster_addr\":\"h:1\",\"client_addr\":\"\",\"state\":0}}}"), ErrInvalid},
	}
	for _, c := range cases {
		if _, err := DecodeCommand(c.data); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := EncodeCommand(&CreateStream{Name: "a", Partitions: 0, ReplicationFactor: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("encoding an invalid command: %v", err)
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range sampleCommands() {
		data, _ := EncodeCommand(c)
		f.Add(data)
	}
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommand(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNewerVersion) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// What decodes re-encodes and decodes to the same command, and
		// applies to a state without panicking.
		again, err := EncodeCommand(c)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", c, err)
		}
		back, err := DecodeCommand(again)
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("re-decoded %#v, %v; want %#v", back, err, c)
		}
		s := testState(t)
		_, _ = applyCommand(&s, c)
	})
}
