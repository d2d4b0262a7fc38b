package keyring

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/ironbus/ironbus/record"
	"github.com/ironbus/ironbus/security"
)

var epoch = time.Unix(1_800_000_000, 0)

func TestCreateLoadRotate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data.keys")
	created, err := Create(file, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(file); err != nil || (runtime.GOOS != "windows" && info.Mode().Perm() != 0o600) {
		t.Fatalf("ring file mode %v, %v", info.Mode(), err)
	}
	if _, err := Create(file, epoch); !errors.Is(err, ErrExists) {
		t.Fatalf("create over a ring: %v, want ErrExists", err)
	}
	rotated, err := Rotate(file, epoch.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded.KeyIDs(); len(got) != 2 || loaded.Active().ID != 2 {
		t.Fatalf("after rotate: keys %v, active %d", got, loaded.Active().ID)
	}
	first, _ := loaded.KeyCheck(1)
	if want, _ := created.KeyCheck(1); first != want {
		t.Fatal("rotation changed key 1")
	}
	second, _ := loaded.KeyCheck(2)
	if want, _ := rotated.KeyCheck(2); second != want || second == first {
		t.Fatal("key 2 did not survive the write, or equals key 1")
	}
}

func TestLoadRefusesAnExposedOrMalformedRing(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no mode bits")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "data.keys")
	if _, err := Create(file, epoch); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file); !errors.Is(err, security.ErrSecretFileExposed) {
		t.Fatalf("a 0640 ring: %v, want ErrSecretFileExposed", err)
	}
	for name, text := range map[string]string{
		"not json":      "{",
		"wrong format":  `{"format":"x","version":1,"active":1,"keys":[]}`,
		"newer version": `{"format":"ironbus-keyring","version":9,"active":1,"keys":[]}`,
		"no keys":       `{"format":"ironbus-keyring","version":1,"active":0,"keys":[]}`,
		"short key":     `{"format":"ironbus-keyring","version":1,"active":1,"keys":[{"id":1,"key":"AAAA"}]}`,
		"old active":    `{"format":"ironbus-keyring","version":1,"active":1,"keys":[{"id":1,"key":"` + zeroKey + `"},{"id":2,"key":"` + zeroKey + `"}]}`,
		"ids skip":      `{"format":"ironbus-keyring","version":1,"active":3,"keys":[{"id":1,"key":"` + zeroKey + `"},{"id":3,"key":"` + zeroKey + `"}]}`,
	} {
		bad := filepath.Join(dir, "bad.keys")
		if err := os.WriteFile(bad, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

const zeroKey = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

func TestSealingKeysDifferAndOpen(t *testing.T) {
	ring, err := New(epoch)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ring.SealingKey()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ring.SealingKey()
	if a.Salt == b.Salt {
		t.Fatal("two sealing keys drew the same salt")
	}
	body := make([]byte, 100)
	_, _ = rand.Read(body)
	frameA := record.AppendEncryptedFrame(nil, 5, 6, body, record.Checksum(body), a)
	frameB := record.AppendEncryptedFrame(nil, 5, 6, body, record.Checksum(body), b)
	if bytes.Equal(frameA[record.FrameHeaderSize+record.EncryptionOverhead-16:], frameB[record.FrameHeaderSize+record.EncryptionOverhead-16:]) {
		t.Fatal("one offset sealed under two salts gave the same ciphertext")
	}
	for _, frame := range [][]byte{frameA, frameB} {
		h, _, err := record.ParseFrame(frame, record.DefaultMaxBody)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := record.AppendDecryptedFrame(nil, frame, h, ring)
		if err != nil || !bytes.Equal(plain[record.FrameHeaderSize:record.FrameHeaderSize+len(body)], body) {
			t.Fatalf("open: %v", err)
		}
	}
	other, _ := New(epoch)
	h, _, _ := record.ParseFrame(frameA, record.DefaultMaxBody)
	if _, err := record.AppendDecryptedFrame(nil, frameA, h, other); !errors.Is(err, record.ErrDecrypt) {
		t.Fatalf("another ring's key 1: %v, want ErrDecrypt", err)
	}
	if _, err := ring.OpeningKey(9, a.Salt); !errors.Is(err, record.ErrNoKey) || !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("unknown key id: %v", err)
	}
}
