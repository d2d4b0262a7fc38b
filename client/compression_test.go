package client_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ironbus/ironbus/client"
	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/wire"
)

// jsonPayload is a compressible 1 KiB-ish payload: JSON with repeated
// field names and varying values.
func jsonPayload(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"device":"sensor-%03d","seq":%d,"status":"ok","tags":["edge","cabinet-%d"]}`, i*37%1000, i, i%8)
	}
	return b.Bytes()[:n]
}

func randomPayload(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestCompressionRoundTripThroughABroker sends a compressible and an
// incompressible payload with each choice of compression, through a real
// broker, and reads them back both as a work group and as a stream.
func TestCompressionRoundTripThroughABroker(t *testing.T) {
	c := servedClient(t)
	ctx := testContext(t)
	compressible, incompressible := jsonPayload(1024), randomPayload(1024)
	for _, choice := range []client.Compression{client.CompressLZ4, client.CompressZstd, client.CompressNone} {
		t.Run(choice.String(), func(t *testing.T) {
			stream := "compress-" + choice.String()
			p := c.NewProducer(stream, client.ProducerOptions{Compression: choice})
			for _, payload := range [][]byte{compressible, incompressible} {
				if err := p.Send(ctx, client.Record{Key: []byte("k"), Payload: payload}); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			wantCodec := map[client.Compression]client.Codec{client.CompressLZ4: client.CodecLZ4,
				client.CompressZstd: client.CodecZstd, client.CompressNone: client.CodecNone}[choice]
			result, err := c.Fetch(ctx, stream, "work", client.FetchOptions{MaxRecords: 2})
			if err != nil || len(result.Messages) != 2 {
				t.Fatalf("fetch: %d messages, %v", len(result.Messages), err)
			}
			checkDecompressed(t, result.Messages, compressible, incompressible, wantCodec)
			s, err := c.Stream(stream, "tail", client.StreamOptions{})
			if err != nil {
				t.Fatal(err)
			}
			batch, err := s.Next(ctx)
			if err != nil || len(batch.Messages) != 2 {
				t.Fatalf("stream: %d messages, %v", len(batch.Messages), err)
			}
			checkDecompressed(t, batch.Messages, compressible, incompressible, wantCodec)
		})
	}
}

func checkDecompressed(t *testing.T, messages []client.Message, compressible, incompressible []byte, wantCodec client.Codec) {
	t.Helper()
	if !bytes.Equal(messages[0].Payload, compressible) || !bytes.Equal(messages[1].Payload, incompressible) {
		t.Fatal("payloads changed on the way through")
	}
	if messages[0].Codec != wantCodec {
		t.Errorf("compressible payload stored as %s, want %s", messages[0].Codec, wantCodec)
	}
	if messages[1].Codec != client.CodecNone {
		t.Errorf("random payload stored as %s: compression that does not save an eighth is dropped", messages[1].Codec)
	}
}

// TestAwaitedProduceCompressesAndTheCapRefuses: Produce follows
// Options.Compression, and a consumer whose MaxDecompressedBytes is below
// a record's raw size gets a DecompressError it can still Nack.
func TestAwaitedProduceCompressesAndTheCapRefuses(t *testing.T) {
	addr, stop := startServedBroker()
	t.Cleanup(stop)
	ctx := testContext(t)
	producer, err := client.Dial(ctx, addr, client.Options{Compression: client.CompressZstd})
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	payload := jsonPayload(4096)
	if _, err := producer.Produce(ctx, "capped", client.Record{Payload: payload}); err != nil {
		t.Fatal(err)
	}
	small, err := client.Dial(ctx, addr, client.Options{MaxDecompressedBytes: 4095})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	_, err = small.Fetch(ctx, "capped", "g", client.FetchOptions{})
	var rejected *client.DeliveryError
	var decompress *client.DecompressError
	if !errors.Is(err, client.ErrDecompressedTooLarge) || !errors.As(err, &rejected) || !errors.As(err, &decompress) {
		t.Fatalf("fetch over the cap: %v, want a DecompressError wrapping ErrDecompressedTooLarge", err)
	}
	if decompress.Offset != 0 || decompress.RawBytes != 4096 || decompress.Limit != 4095 || decompress.Codec != client.CodecZstd {
		t.Fatalf("the error names %+v", decompress)
	}
	if statuses, err := small.Nack(ctx, "capped", "g", 0, rejected.Rejected[0].Message); err != nil || statuses[0] != client.AckOK {
		t.Fatalf("nack of the refused record: %v %v", statuses, err)
	}
	result, err := producer.Fetch(ctx, "capped", "g", client.FetchOptions{Wait: time.Second})
	if err != nil || len(result.Messages) != 1 || !bytes.Equal(result.Messages[0].Payload, payload) {
		t.Fatalf("a consumer with the default cap: %v", err)
	}
	s, _ := small.Stream("capped", "tail", client.StreamOptions{})
	if _, err := s.Next(ctx); !errors.As(err, &decompress) || decompress.Offset != 0 {
		t.Fatalf("stream over the cap: %v", err)
	}
}

// TestHostileCompressedPayload: a producer frames garbage as lz4 (and as
// zstd) under a valid CRC32C. The broker stores it (it never
// decompresses); the consumer gets a typed error, never a panic.
func TestHostileCompressedPayload(t *testing.T) {
	addr, stop := startServedBroker()
	t.Cleanup(stop)
	for _, codec := range []record.Codec{record.CodecLZ4, record.CodecZstd} {
		body, _ := record.AppendBody(nil, record.Body{Codec: codec, Payload: []byte{0xf0, 0xff, 0xff, 0x00, 0x13, 0x37}, RawLength: 900})
		if werr := rawProduce(t, addr, "hostile", body); werr != nil {
			t.Fatalf("broker refused a well-framed %s body: %v", codec, werr)
		}
	}
	c, err := client.Dial(testContext(t), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Fetch(testContext(t), "hostile", "g", client.FetchOptions{})
	var rejected *client.DeliveryError
	if !errors.As(err, &rejected) || len(rejected.Rejected) != 2 || !errors.Is(err, client.ErrCorruptDelivery) {
		t.Fatalf("fetch of garbage behind a valid CRC: %v", err)
	}
	for _, r := range rejected.Rejected {
		var decompress *client.DecompressError
		if !errors.As(r.Err, &decompress) || decompress.Offset != r.Message.Offset {
			t.Fatalf("rejection %v is not a DecompressError naming its offset", r.Err)
		}
	}
}

// TestBrokerRefusesUnknownCodec: a codec byte no IronBus knows is refused
// at produce time with a typed error, not stored for consumers to trip on.
func TestBrokerRefusesUnknownCodec(t *testing.T) {
	addr, stop := startServedBroker()
	t.Cleanup(stop)
	body, _ := record.AppendBody(nil, record.Body{Codec: 9, Payload: []byte("abc"), RawLength: 3})
	werr := rawProduce(t, addr, "unknown", body)
	if werr == nil || werr.Code != wire.CodeInvalidRequest {
		t.Fatalf("produce with codec 9: %v, want invalid_request", werr)
	}
	huge, _ := record.AppendBody(nil, record.Body{Codec: record.CodecLZ4, Payload: []byte("abc"), RawLength: 1 << 30})
	if werr := rawProduce(t, addr, "unknown", huge); werr == nil || werr.Code != wire.CodeRecordTooLarge {
		t.Fatalf("produce declaring 1 GiB raw: %v, want record_too_large", werr)
	}
}

// rawProduce speaks the protocol by hand to send a body the SDK would
// never frame, and returns the broker's error (nil for a ProduceAck).
func rawProduce(t *testing.T, addr, stream string, body []byte) *wire.Error {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	hello := wire.Hello{MinVersion: wire.ProtocolVersion, MaxVersion: wire.ProtocolVersion, MaxFrame: wire.DefaultMaxFrame, Window: 1}
	if _, err := conn.Write(wire.Append(nil, 0, &hello)); err != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, conn); f.Type != wire.TypeWelcome {
		t.Fatalf("handshake answered with frame type %v", f.Type)
	}
	produce := wire.Produce{Stream: []byte(stream), BodyCRC: record.Checksum(body), Body: body}
	if _, err := conn.Write(wire.Append(nil, 1, &produce)); err != nil {
		t.Fatal(err)
	}
	f := readFrame(t, conn)
	switch f.Type {
	case wire.TypeProduceAck:
		return nil
	case wire.TypeError:
		werr, err := wire.DecodeError(f.Body)
		if err != nil {
			t.Fatal(err)
		}
		return werr
	}
	t.Fatalf("produce answered with frame type %v", f.Type)
	return nil
}

func readFrame(t *testing.T, conn net.Conn) wire.Frame {
	t.Helper()
	var prefix [4]byte
	if _, err := io.ReadFull(conn, prefix[:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4+binary.LittleEndian.Uint32(prefix[:]))
	copy(buf, prefix[:])
	if _, err := io.ReadFull(conn, buf[4:]); err != nil {
		t.Fatal(err)
	}
	f, _, err := wire.ParseFrame(buf, wire.DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCorruptCompressedRecordIsCaughtByTheCRC: a bit flipped in a
// compressed record on its way to the consumer is the CRC's to catch,
// before any decompression (integrity before transform): the rejection is
// a checksum failure, not a decompression error.
func TestCorruptCompressedRecordIsCaughtByTheCRC(t *testing.T) {
	b := startFake(t, nil)
	c := dial(t, b, client.Options{})
	ctx := testContext(t)
	if _, err := c.Produce(ctx, "s", client.Record{Payload: jsonPayload(2048)}); err != nil {
		t.Fatal(err)
	}
	view, err := record.Parse(b.bodies("s")[0])
	if err != nil || view.Codec != record.CodecLZ4 {
		t.Fatalf("stored body: codec %s, %v", view.Codec, err)
	}
	b.locked(func() { b.corrupt[0] = true })
	_, err = c.Fetch(ctx, "s", "g", client.FetchOptions{})
	var decompress *client.DecompressError
	if !errors.Is(err, client.ErrCorruptDelivery) || errors.As(err, &decompress) || !strings.Contains(err.Error(), "CRC32C") {
		t.Fatalf("fetch of a corrupted compressed record: %v, want a CRC failure", err)
	}
}

func TestParseCompression(t *testing.T) {
	for _, c := range []client.Compression{client.CompressLZ4, client.CompressNone, client.CompressZstd} {
		if got, err := client.ParseCompression(c.String()); err != nil || got != c {
			t.Errorf("ParseCompression(%q) = %v, %v", c.String(), got, err)
		}
	}
	if _, err := client.ParseCompression("gzip"); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("ParseCompression(gzip) = %v, want ErrInvalidArgument", err)
	}
	if _, err := client.Dial(testContext(t), "127.0.0.1:1", client.Options{Compression: 9}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("Dial with compression 9: %v, want ErrInvalidArgument before dialing", err)
	}
}
