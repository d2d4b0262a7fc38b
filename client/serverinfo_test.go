package client

import (
	"testing"

	"github.com/ironbus/ironbus/record"
)

func TestLargestPayload(t *testing.T) {
	for _, c := range []struct {
		info ServerInfo
		want int
	}{
		{ServerInfo{}, record.DefaultMaxBody},
		{ServerInfo{MaxFrame: 1 << 20}, 1 << 20},
		{ServerInfo{MaxFrame: 1 << 20, MaxRecordBytes: 4096}, 4096},
		{ServerInfo{MaxFrame: 4096, MaxRecordBytes: 1 << 20}, 4096},
		{ServerInfo{MaxRecordBytes: 4096}, record.DefaultMaxBody},
	} {
		if got := c.info.LargestPayload(); got != c.want {
			t.Errorf("%+v: got %d, want %d", c.info, got, c.want)
		}
	}
}
