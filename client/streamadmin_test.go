package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/wire"
)

func wireCode(t *testing.T, err error, code wire.Code) *wire.Error {
	t.Helper()
	var werr *wire.Error
	if !errors.As(err, &werr) || werr.Code != code {
		t.Fatalf("got %v, want %s", err, code)
	}
	return werr
}

func TestStreamAdminOverTheWire(t *testing.T) {
	ctx := context.Background()
	c := servedClient(t)
	settings := client.StreamSettings{Partitions: 4, MaxBytes: 1 << 30, MaxAge: time.Hour, MaxRecords: 1000}
	created, err := c.CreateStream(ctx, "orders", settings)
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Partitions) != 4 || created.MaxAge != time.Hour || created.MaxRecords != 1000 || created.Created.IsZero() {
		t.Fatalf("created %+v", created)
	}
	if _, err := c.CreateStream(ctx, "orders", settings); err != nil {
		t.Fatalf("the same create again: %v", err)
	}
	settings.Partitions = 8
	werr := wireCode(t, func() error { _, err := c.CreateStream(ctx, "orders", settings); return err }(), wire.CodeConflict)
	if !strings.Contains(werr.Message, "partitions 4") {
		t.Fatalf("conflict does not name the settings: %s", werr.Message)
	}
	_, err = c.CreateStream(ctx, "bad name", client.StreamSettings{})
	if err == nil {
		t.Fatal("a bad name was accepted")
	}
	wireCode(t, func() error {
		_, err := c.CreateStream(ctx, "huge", client.StreamSettings{Partitions: wire.MaxPartitions + 1})
		return err
	}(), wire.CodeInvalidRequest)

	if _, err := c.Bind(ctx, "orders.>", "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStream(ctx, "audit", client.StreamSettings{}); err != nil {
		t.Fatal(err)
	}
	werr = wireCode(t, func() error { _, err := c.Bind(ctx, "*.eu", "audit"); return err }(), wire.CodeConflict)
	if !strings.Contains(werr.Message, `"orders.>"`) {
		t.Fatalf("the conflict does not name the other binding: %s", werr.Message)
	}
	wireCode(t, func() error { _, err := c.Bind(ctx, "a..b", "audit"); return err }(), wire.CodeInvalidName)
	wireCode(t, func() error { _, err := c.Bind(ctx, "audit.>", "missing"); return err }(), wire.CodeNotFound)
	all, err := c.Bind(ctx, "audit.>", "audit")
	if err != nil || len(all) != 2 {
		t.Fatalf("bindings %+v %v", all, err)
	}
	info, err := c.StreamInfo(ctx, "orders")
	if err != nil || len(info.Bindings) != 1 || info.Bindings[0].Pattern != "orders.>" {
		t.Fatalf("info %+v %v", info, err)
	}
	if left, err := c.Unbind(ctx, "audit.>"); err != nil || len(left) != 1 {
		t.Fatalf("unbind: %+v %v", left, err)
	}
	wireCode(t, func() error { _, err := c.Unbind(ctx, "audit.>"); return err }(), wire.CodeNotFound)
	streams, err := c.Streams(ctx)
	if err != nil || len(streams) != 2 || streams[0].Name != "audit" || streams[1].Name != "orders" {
		t.Fatalf("streams %+v %v", streams, err)
	}
	wireCode(t, func() error { _, err := c.StreamInfo(ctx, "nope"); return err }(), wire.CodeNotFound)
}

func TestPurgeDropsEveryRecordAndOffsetsKeepRising(t *testing.T) {
	ctx := context.Background()
	c := servedClient(t)
	produceMany(t, c, "jobs", 50)
	purged, err := c.PurgeStream(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if p := purged.Partitions[0]; p.First != 50 || p.End != 50 {
		t.Fatalf("after purge: %+v", p)
	}
	ack, err := c.Produce(ctx, "jobs", client.Record{Payload: []byte("after")})
	if err != nil || ack.Offset != 50 {
		t.Fatalf("the next record got %+v %v", ack, err)
	}
	wireCode(t, func() error { _, err := c.PurgeStream(ctx, "nope"); return err }(), wire.CodeNotFound)
}

func TestRemoveDeletesTheStreamAndItsBindings(t *testing.T) {
	ctx := context.Background()
	c := servedClient(t)
	if _, err := c.CreateStream(ctx, "temp", client.StreamSettings{Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bind(ctx, "temp.*", "temp"); err != nil {
		t.Fatal(err)
	}
	produceMany(t, c, "temp", 3)
	was, err := c.RemoveStream(ctx, "temp")
	if err != nil {
		t.Fatal(err)
	}
	if was.Partitions[0].End != 3 || len(was.Bindings) != 1 {
		t.Fatalf("removed stream as it was: %+v", was)
	}
	if b, err := c.Bindings(ctx); err != nil || len(b) != 0 {
		t.Fatalf("bindings left %+v %v", b, err)
	}
	wireCode(t, func() error { _, err := c.StreamInfo(ctx, "temp"); return err }(), wire.CodeNotFound)
	// Publishing to the name again makes a new, empty, one-partition stream.
	ack, err := c.Produce(ctx, "temp", client.Record{Payload: []byte("again")})
	if err != nil || ack.Offset != 0 {
		t.Fatalf("recreated stream: %+v %v", ack, err)
	}
}
