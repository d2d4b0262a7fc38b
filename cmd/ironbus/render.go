package main

import (
	"encoding/base64"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ironbus/ironbus/codec"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/segment"
)

// How a byte field is written in JSON: record bytes are opaque, so JSON
// gets them as text only when that loses nothing, and says which it chose.
const (
	encodingText   = "text"
	encodingBase64 = "base64"
)

// The schemas of the NDJSON lines the reading commands print: every line
// carries its own, so a consumer of a mixed stream (records and gaps) tells
// them apart without guessing from the fields present.
const (
	recordSchema = "ironbus.cli.record.v1"
	gapSchema    = "ironbus.cli.gap.v1"
)

// recordOutput is one record line of dump (and peek --json).
type recordOutput struct {
	Schema          string         `json:"schema"`
	Offset          uint64         `json:"offset"`
	Timestamp       string         `json:"timestamp"`
	TimestampNanos  int64          `json:"timestamp_ns"`
	Key             string         `json:"key"`
	KeyEncoding     string         `json:"key_encoding"`
	Subject         string         `json:"subject"`
	SubjectEncoding string         `json:"subject_encoding"`
	Headers         []headerOutput `json:"headers"`
	Payload         string         `json:"payload"`
	PayloadEncoding string         `json:"payload_encoding"`
	// Codec is how the payload is stored; Payload is always shown
	// decompressed, RawLength bytes long, from StoredLength bytes on disk.
	Codec        string `json:"codec"`
	RawLength    uint32 `json:"raw_length"`
	StoredLength int    `json:"stored_length"`
	// DecompressError is set when a compressed payload does not
	// decompress; Payload is then the stored bytes, base64.
	DecompressError string  `json:"decompress_error,omitempty"`
	ProducerID      *uint64 `json:"producer_id,omitempty"`
	Sequence        *uint64 `json:"sequence,omitempty"`
	BodyCRC         uint32  `json:"body_crc"`
	// BodyError is set when the body is not a valid IronBus body; the raw
	// body is then in Payload, base64, so nothing is hidden.
	BodyError string `json:"body_error,omitempty"`
}

// headerOutput is a list element rather than a map entry because header
// names may repeat and their order is part of the record.
type headerOutput struct {
	Name          string `json:"name"`
	Value         string `json:"value"`
	ValueEncoding string `json:"value_encoding"`
}

type gapOutput struct {
	Schema    string   `json:"schema"`
	Stream    string   `json:"stream,omitempty"` // sub: the stream and partition of the gap
	Partition *uint32  `json:"partition,omitempty"`
	Gap       gapRange `json:"gap"`
}

// in names the stream and partition a consumer's gap belongs to.
func (g gapOutput) in(stream string, partition uint32) gapOutput {
	g.Stream, g.Partition = stream, &partition
	return g
}

func newGapOutput(from, to uint64, reason string) gapOutput {
	return gapOutput{Schema: gapSchema, Gap: gapRange{From: from, To: to, Reason: reason}}
}

type gapRange struct {
	From   uint64 `json:"from"`
	To     uint64 `json:"to"` // exclusive
	Reason string `json:"reason"`
}

// isPrintableText reports whether b can be shown as text without hiding
// anything: valid UTF-8 of printable characters, newlines and tabs.
func isPrintableText(b []byte) bool {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			return false
		}
		if !strconv.IsPrint(r) && r != '\n' && r != '\t' {
			return false
		}
		b = b[size:]
	}
	return true
}

// encodeBytes returns b for JSON and the encoding it is in.
func encodeBytes(b []byte) (string, string) {
	if isPrintableText(b) {
		return string(b), encodingText
	}
	return base64.StdEncoding.EncodeToString(b), encodingBase64
}

// peekPayloadBytes bounds the payload bytes peek shows: a line a person
// can read. dump has no such bound.
const peekPayloadBytes = 1024

// humanPayload shows a payload on one line: text as is (quoted when it
// would break the line or pass for the other forms), else base64, and cut
// to peekPayloadBytes.
func humanPayload(b []byte) string { return humanPayloadAs(b, isPrintableText(b)) }

// humanPayloadAs is humanPayload with the text-or-binary choice made by
// the caller: a compressed payload is never text, whatever its bytes.
func humanPayloadAs(b []byte, text bool) string {
	shown := b
	if len(b) > peekPayloadBytes {
		cut := peekPayloadBytes
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		shown = b[:cut]
	}
	rendered := humanBytes(shown, text, "\n\t")
	if len(shown) < len(b) {
		rendered += fmt.Sprintf("... (%d more bytes; ironbus dump prints them all)", len(b)-len(shown))
	}
	return rendered
}

// humanField shows a key, subject or header, which other fields follow on
// the line, so a space or separator inside it is quoted too.
func humanField(b []byte) string { return humanBytes(b, isPrintableText(b), " \n\t={}") }

func humanBytes(b []byte, text bool, quoteIfAny string) string {
	if !text {
		return "base64:" + base64.StdEncoding.EncodeToString(b)
	}
	value := string(b)
	if strings.ContainsAny(value, quoteIfAny) || strings.HasPrefix(value, "base64:") || strings.HasPrefix(value, `"`) {
		return strconv.Quote(value)
	}
	return value
}

func formatTimestamp(nanos int64) string {
	return time.Unix(0, nanos).UTC().Format(time.RFC3339Nano)
}

// newReadDecompressor is the decompressor of the offline readers. The
// cap is the format's hard maximum: the operator is reading their own
// data, the broker already refused declared sizes above its record limit,
// and only the size a record declares is ever allocated.
func newReadDecompressor() *codec.Decompressor { return codec.NewDecompressor(record.AbsoluteMaxBody) }

// rawPayload is the payload as the producer sent it. The segment reader
// verified the record's CRC32C before handing it over, so decompressing
// it here keeps integrity before transform (DESIGN I7).
func rawPayload(d *codec.Decompressor, view record.View) ([]byte, error) {
	return d.Decompress(nil, view.Codec, view.Payload, view.RawLength)
}

// entryOutput converts a reader entry to its JSON line.
func entryOutput(entry segment.Entry, d *codec.Decompressor) any {
	if entry.Gap != nil {
		return newGapOutput(entry.Gap.From, entry.Gap.To, entry.Gap.Reason)
	}
	output := recordOutput{Schema: recordSchema, Offset: entry.Offset, Timestamp: formatTimestamp(entry.Timestamp),
		TimestampNanos: entry.Timestamp, BodyCRC: entry.BodyCRC, Headers: []headerOutput{}}
	view, err := record.Parse(entry.Body)
	if err != nil {
		output.BodyError = err.Error()
		output.Payload, output.PayloadEncoding = base64.StdEncoding.EncodeToString(entry.Body), encodingBase64
		output.KeyEncoding, output.SubjectEncoding = encodingText, encodingText
		return output
	}
	output.Key, output.KeyEncoding = encodeBytes(view.Key)
	output.Subject, output.SubjectEncoding = encodeBytes(view.Subject)
	for name, value := range view.Headers() {
		header := headerOutput{Name: string(name)}
		header.Value, header.ValueEncoding = encodeBytes(value)
		output.Headers = append(output.Headers, header)
	}
	output.Codec, output.RawLength, output.StoredLength = view.Codec.String(), view.RawLength, len(view.Payload)
	if raw, err := rawPayload(d, view); err != nil {
		// Compressed bytes that happen to look like text are still not
		// the payload; never present them as if they were.
		output.DecompressError = err.Error()
		output.Payload, output.PayloadEncoding = base64.StdEncoding.EncodeToString(view.Payload), encodingBase64
	} else {
		output.Payload, output.PayloadEncoding = encodeBytes(raw)
	}
	if view.HasProducer {
		output.ProducerID, output.Sequence = &view.ProducerID, &view.Sequence
	}
	return output
}

// humanEntry formats a reader entry as one line for peek.
func humanEntry(entry segment.Entry, d *codec.Decompressor) string {
	if entry.Gap != nil {
		return fmt.Sprintf("gap %d..%d (%s)", entry.Gap.From, entry.Gap.To-1, entry.Gap.Reason)
	}
	var line strings.Builder
	fmt.Fprintf(&line, "#%d %s", entry.Offset, formatTimestamp(entry.Timestamp))
	view, err := record.Parse(entry.Body)
	if err != nil {
		fmt.Fprintf(&line, " undecodable body (%s) %dB body=%s", err.Error(), len(entry.Body),
			humanPayloadAs(entry.Body, false))
		return line.String()
	}
	fmt.Fprintf(&line, " key=%s subject=%s", humanField(view.Key), humanField(view.Subject))
	writeHumanHeaders(&line, view.Headers())
	if view.HasProducer {
		fmt.Fprintf(&line, " producer=%d seq=%d", view.ProducerID, view.Sequence)
	}
	if view.Codec != record.CodecNone {
		raw, err := rawPayload(d, view)
		if err != nil {
			fmt.Fprintf(&line, " codec=%s raw=%dB stored=%dB undecompressable (%s) payload=%s", view.Codec.String(),
				view.RawLength, len(view.Payload), err.Error(), humanPayloadAs(view.Payload, false))
			return line.String()
		}
		fmt.Fprintf(&line, " codec=%s stored=%dB %dB payload=%s", view.Codec.String(), len(view.Payload),
			len(raw), humanPayload(raw))
		return line.String()
	}
	fmt.Fprintf(&line, " %dB payload=%s", len(view.Payload), humanPayload(view.Payload))
	return line.String()
}

// writeHumanHeaders appends " headers={name=value ...}" when there are
// headers (peek and sub print them alike).
func writeHumanHeaders(line *strings.Builder, headers iter.Seq2[[]byte, []byte]) {
	first := true
	for name, value := range headers {
		if first {
			line.WriteString(" headers={")
		} else {
			line.WriteByte(' ')
		}
		first = false
		fmt.Fprintf(line, "%s=%s", humanField(name), humanField(value))
	}
	if !first {
		line.WriteByte('}')
	}
}
