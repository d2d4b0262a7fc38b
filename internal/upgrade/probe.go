package upgrade

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// probeTimeout bounds `X version --json`: a binary that hangs is as unfit
// to install as one that fails.
const probeTimeout = 30 * time.Second

// Identity is what a binary says about itself in `version --json`.
type Identity struct {
	Version string `json:"version"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	Formats struct {
		DataDir int `json:"data_dir"`
		Segment int `json:"segment"`
		Frame   int `json:"frame"`
		Body    int `json:"body"`
	} `json:"formats"`
}

// Probe runs `binary version --json` and decodes its answer. A binary
// that does not start here (another architecture, truncated) or answers
// with anything but the version object is ErrNotBinary.
func Probe(ctx context.Context, binary string) (Identity, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	command := exec.CommandContext(ctx, binary, "version", "--json")
	command.Stdout, command.Stderr = &stdout, &stderr
	if err := command.Run(); err != nil {
		detail := ""
		if said := strings.TrimSpace(stderr.String()); said != "" {
			detail = " (" + said + ")"
		}
		return Identity{}, fmt.Errorf("%w: running `%s version --json`: %w%s", ErrNotBinary, binary, err, detail)
	}
	var identity Identity
	if err := json.Unmarshal(stdout.Bytes(), &identity); err != nil || identity.Formats.DataDir == 0 {
		return Identity{}, fmt.Errorf("%w: `%s version --json` did not print an ironbus version object", ErrNotBinary, binary)
	}
	return identity, nil
}

// fileDigest returns the SHA-256 and size of a file.
func fileDigest(name string) (string, int64, error) {
	file, err := os.Open(name)
	if err != nil {
		return "", 0, err
	}
	defer file.Close()
	hash := sha256.New()
	size, err := io.Copy(hash, file)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(hash.Sum(nil)), size, nil
}
