package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ironbus/ironbus/wire"
)

// TestLeaderTransferCodec: both frames round-trip, their fixed parts are
// the sizes the constants say, and a body cut short or carrying one byte
// too many is refused as malformed, never read as another message.
func TestLeaderTransferCodec(t *testing.T) {
	request := wire.LeaderTransfer{Stream: []byte("orders"), Partition: 2, To: 3}
	answer := wire.LeaderTransferred{Stream: []byte("orders"), Partition: 2, From: 1, Leader: 3, Term: 12, ElapsedUs: 28_000}
	if n := len((&wire.LeaderTransfer{}).AppendBody(nil)); n != wire.LeaderTransferSize {
		t.Fatalf("an empty LeaderTransfer is %d bytes, LeaderTransferSize says %d", n, wire.LeaderTransferSize)
	}
	if n := len((&wire.LeaderTransferred{}).AppendBody(nil)); n != wire.LeaderTransferredSize {
		t.Fatalf("an empty LeaderTransferred is %d bytes, LeaderTransferredSize says %d", n, wire.LeaderTransferredSize)
	}
	cases := []struct {
		name   string
		body   []byte
		decode func([]byte) (string, error)
		want   string
	}{
		{"LeaderTransfer", request.AppendBody(nil), func(b []byte) (string, error) {
			m, err := wire.DecodeLeaderTransfer(b)
			return string(m.AppendBody(nil)), err
		}, string(request.AppendBody(nil))},
		{"LeaderTransferred", answer.AppendBody(nil), func(b []byte) (string, error) {
			m, err := wire.DecodeLeaderTransferred(b)
			return string(m.AppendBody(nil)), err
		}, string(answer.AppendBody(nil))},
	}
	for _, tc := range cases {
		got, err := tc.decode(tc.body)
		if err != nil || got != tc.want {
			t.Fatalf("%s: round trip: %v, %x", tc.name, err, got)
		}
		for cut := range len(tc.body) {
			if _, err := tc.decode(tc.body[:cut]); !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("%s: a %d-byte prefix: %v, want ErrMalformed", tc.name, cut, err)
			}
		}
		if _, err := tc.decode(append(bytes.Clone(tc.body), 0)); !errors.Is(err, wire.ErrMalformed) {
			t.Fatalf("%s: a trailing byte: %v, want ErrMalformed", tc.name, err)
		}
		// A stream length past the end of the body.
		long := bytes.Clone(tc.body)
		long[0], long[1] = 0xff, 0xff
		if _, err := tc.decode(long); !errors.Is(err, wire.ErrMalformed) {
			t.Fatalf("%s: a stream length past the body: %v, want ErrMalformed", tc.name, err)
		}
	}
	decoded, err := wire.DecodeLeaderTransferred(answer.AppendBody(nil))
	if err != nil || string(decoded.Stream) != "orders" || decoded.From != 1 || decoded.Leader != 3 || decoded.Term != 12 || decoded.ElapsedUs != 28_000 {
		t.Fatalf("LeaderTransferred decoded as %+v, %v", decoded, err)
	}
}
