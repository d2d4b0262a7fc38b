package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ironbus/ironbus/client"
)

// maxBenchPayloadFile bounds what bench reads of --payload-file: the
// payloads cycle through it, so a sample of real data is enough, and the
// load generator's RAM stays a function of its flags.
const maxBenchPayloadFile = 64 << 20

// benchCompressOptions choose what the load's producers compress with and
// what their payloads hold.
type benchCompressOptions struct {
	compress    string
	payloadFile string
}

// addBenchCompressFlags registers --compress and --payload-file.
func addBenchCompressFlags(cmd *cobra.Command, options *benchCompressOptions) {
	flags := cmd.Flags()
	flags.StringVar(&options.compress, "compress", "none",
		"producer compression: none, lz4 or zstd (the default payloads are zeros, so give --payload-file for numbers that mean anything)")
	flags.StringVar(&options.payloadFile, "payload-file", "",
		"fill payloads with this file's bytes, --payload-bytes at a time, cycling through its first 64 MiB")
}

// benchPayloads is the validated form: the codec and the bytes payloads
// are cut from (nil: zeros).
type benchPayloads struct {
	compression client.Compression
	source      []byte
}

func (options *benchCompressOptions) load() (benchPayloads, error) {
	var payloads benchPayloads
	compression, err := client.ParseCompression(options.compress)
	if err != nil {
		return payloads, exitErrorf(exitUsage, "--compress %q: want none, lz4 or zstd", options.compress)
	}
	payloads.compression = compression
	if options.payloadFile == "" {
		return payloads, nil
	}
	file, err := os.Open(options.payloadFile)
	if err != nil {
		return payloads, exitErrorf(exitNotFound, "--payload-file: %w", err)
	}
	defer file.Close()
	source, err := io.ReadAll(io.LimitReader(file, maxBenchPayloadFile))
	if err != nil {
		return payloads, exitErrorf(exitUnreadable, "--payload-file: %w", err)
	}
	if len(source) == 0 {
		return payloads, exitErrorf(exitUsage, "--payload-file %s is empty: give a sample of the data you will publish", options.payloadFile)
	}
	payloads.source = source
	return payloads, nil
}

// fill writes the payload of one record: the next len(payload) bytes of
// the source, wrapping at its end, from position; it returns the position
// after them. Without a source the payload stays zeros.
func (payloads benchPayloads) fill(payload []byte, position int) int {
	if len(payloads.source) == 0 {
		return 0
	}
	for written := 0; written < len(payload); {
		n := copy(payload[written:], payloads.source[position:])
		written += n
		position = (position + n) % len(payloads.source)
	}
	return position
}

// describe names the payloads in bench's report.
func (payloads benchPayloads) describe(file string) string {
	if file == "" {
		return fmt.Sprintf("zero-filled payloads, compression %s", payloads.compression)
	}
	return fmt.Sprintf("payloads from %s, compression %s", file, payloads.compression)
}
