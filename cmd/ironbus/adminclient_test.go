package main

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/ironbus/ironbus/broker/health"
)

// FuzzDecodeAdmin feeds arbitrary bytes to the /admin decoder the report
// and server commands use: it returns a document of this schema or a
// typed error (exit 4), never panics.
func FuzzDecodeAdmin(f *testing.F) {
	valid, err := json.Marshal(health.Admin{Schema: health.AdminSchema, Streams: []health.Stream{{Name: "orders"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte(`{"schema":"ironbus.admin.v2"}`))
	f.Add([]byte(`{"schema":"ironbus.admin.v1","streams":null,"recovery":[{"report":{"events":[{"reason":"torn_tail"}]}}]}`))
	f.Add([]byte(`{"schema":"ironbus.admin.v1","recovery":[{"report":{"events":[{"reason":"no_such_reason"}]}}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := decodeAdmin(data, "127.0.0.1:7778")
		if err != nil {
			var exit *exitError
			if !errors.As(err, &exit) || exit.code != exitUnreadable {
				t.Fatalf("decodeAdmin error %v is not an exit-4 error", err)
			}
			return
		}
		if doc.Schema != health.AdminSchema {
			t.Fatalf("decodeAdmin accepted schema %q", doc.Schema)
		}
	})
}
