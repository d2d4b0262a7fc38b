package main

import (
	"github.com/spf13/cobra"
)

func newDumpCmd(opts *globalOptions) *cobra.Command {
	read := &readOptions{}
	cmd := &cobra.Command{
		Use:   "dump --data-dir DIR",
		Short: "Print the records of a log as NDJSON, read-only",
		Long: `Print records of one log (a partition of a stream) as NDJSON: one JSON
object per line, for jq, scripts and other programs. Output is always NDJSON;
--json is accepted so every command takes it.

A record line:

  {"offset":0,"timestamp":"2026-01-02T03:04:05.000000006Z","timestamp_ns":...,
   "key":"...","key_encoding":"text","subject":"...","subject_encoding":"text",
   "headers":[{"name":"...","value":"...","value_encoding":"text"}],
   "payload":"...","payload_encoding":"text","codec":"none","raw_length":26,
   "stored_length":26,"body_crc":1234567890}

Byte fields are text when they are printable UTF-8, else base64, and each
says which in its *_encoding field. The payload is always shown as the
producer sent it: a compressed one (codec lz4 or zstd) is decompressed, with
raw_length its length and stored_length the bytes it takes on disk; if it
does not decompress, decompress_error says why and payload holds the stored
bytes, base64. producer_id and sequence appear when the
producer set them; body_error appears (with the raw body as a base64
payload) when a body is not a valid IronBus body. Offsets the log does not
hold are one line: {"gap":{"from":F,"to":T,"reason":"..."}} with T exclusive.

dump opens the data directory read-only with a shared lock and changes
nothing. If a record cannot be read, the lines before it are printed and
dump exits with code 4 (with --json, an ironbus.cli.error.v1 object is the
last line).`,
		Example: `  # every record of the default stream
  ironbus dump --data-dir /var/lib/ironbus > default.ndjson

  # payloads of "orders" partition 1 from offset 5000, 100 records
  ironbus dump --data-dir /var/lib/ironbus --stream orders --partition 1 --from 5000 --limit 100 | jq -r .payload`,
		Args: cobra.NoArgs,
	}
	addReadFlags(cmd, read, 0, "most records to print (0: every record to the end of the log)")
	cmd.Flags().BoolVar(&opts.json, "json", false, "accepted for uniformity; dump always prints NDJSON")
	cmd.RunE = classified(func() error {
		if err := read.validate(); err != nil {
			return err
		}
		return writeEntryLines(opts, read)
	})
	return cmd
}
