package backup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/ironbus/ironbus/segment/format"
)

// The manifest is the file MANIFEST at the top of a backup: a JSON object,
// then one line "crc32c <8 hex digits>" holding the CRC32C (Castagnoli)
// of every byte before that line. It is written last, so its presence
// means the backup finished; its checksum means it is the one written.
const (
	ManifestName   = "MANIFEST"
	ManifestSchema = "ironbus.backup.manifest.v1"
	// DataDirName is the directory of a backup holding the copied files,
	// laid out exactly like the data directory they came from.
	DataDirName = "data"
	// maxManifestBytes bounds what a decoder reads: a manifest lists files,
	// so even a huge directory stays far below it.
	maxManifestBytes = 256 << 20
	crcLinePrefix    = "crc32c "
)

// File kinds in a manifest.
const (
	KindFormat     = "format"
	KindSegment    = "segment"
	KindCheckpoint = "checkpoint"
	// KindMetadata is a small top-level file the broker keeps beside the
	// logs (the stream catalog, the wall-clock high-water): copied whole,
	// checked by its own CRC when the broker reads it.
	KindMetadata = "metadata"
)

// Manifest describes a backup: every file with its size and checksum, and
// what each log holds.
type Manifest struct {
	Schema  string    `json:"schema"`
	Created time.Time `json:"created"`
	Source  string    `json:"source"`
	// Versions of the formats the files are in; a restore refuses newer
	// ones than it understands.
	DataFormatVersion    int     `json:"data_format_version"`
	SegmentFormatVersion int     `json:"segment_format_version"`
	Bytes                int64   `json:"bytes"`
	Files                []File  `json:"files"`
	Logs                 []Range `json:"logs"`
}

// File is one file of a backup, by its path relative to the data
// directory (slash-separated).
type File struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
	// Linked: a hard link to the source's file, not a copy.
	Linked bool `json:"linked,omitempty"`
}

// Range is what a backup holds of one log.
type Range struct {
	// Dir is the nested data directory holding the log ("" for the top
	// one, "deadletters" for dead-letter queues).
	Dir         string `json:"dir"`
	Stream      string `json:"stream"`
	Partition   uint32 `json:"partition"`
	Segments    int    `json:"segments"`
	FirstOffset uint64 `json:"first_offset"`
	NextOffset  uint64 `json:"next_offset"`
	Records     uint64 `json:"records"`
	Checkpoints int    `json:"checkpoints"`
}

// EncodeManifest renders m with its checksum line.
func EncodeManifest(m Manifest) ([]byte, error) {
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("backup: encoding the manifest: %w", err)
	}
	body = append(body, '\n')
	return fmt.Appendf(body, "%s%08x\n", crcLinePrefix, format.CRC(body)), nil
}

// DecodeManifest parses and checks a manifest image. Every failure wraps
// ErrCorruptManifest, ErrTooNew or ErrUnsafePath.
func DecodeManifest(image []byte) (Manifest, error) {
	if len(image) > maxManifestBytes {
		return Manifest{}, fmt.Errorf("%w: %d bytes", ErrCorruptManifest, len(image))
	}
	trimmed := bytes.TrimSuffix(image, []byte("\n"))
	cut := bytes.LastIndexByte(trimmed, '\n')
	if cut < 0 {
		return Manifest{}, fmt.Errorf("%w: no checksum line", ErrCorruptManifest)
	}
	body, line := image[:cut+1], string(trimmed[cut+1:])
	digits, ok := strings.CutPrefix(line, crcLinePrefix)
	if !ok || len(digits) != 8 {
		return Manifest{}, fmt.Errorf("%w: last line is not %q", ErrCorruptManifest, crcLinePrefix+"<8 hex digits>")
	}
	want, err := strconv.ParseUint(digits, 16, 32)
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: checksum %q", ErrCorruptManifest, digits)
	}
	if got := format.CRC(body); got != uint32(want) {
		return Manifest{}, fmt.Errorf("%w: checksum %08x, computed %08x", ErrCorruptManifest, want, got)
	}
	var m Manifest
	decoder := json.NewDecoder(bytes.NewReader(body))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrCorruptManifest, err)
	}
	return m, m.check()
}

// check refuses what a restore must not act on: another schema, newer
// formats, paths that leave the backup, duplicates, negative sizes.
func (m Manifest) check() error {
	if m.Schema != ManifestSchema {
		if strings.HasPrefix(m.Schema, "ironbus.backup.manifest.") {
			return fmt.Errorf("%w: manifest schema %q", ErrTooNew, m.Schema)
		}
		return fmt.Errorf("%w: schema %q", ErrCorruptManifest, m.Schema)
	}
	seen := make(map[string]bool, len(m.Files))
	for _, file := range m.Files {
		if !safePath(file.Path) {
			return fmt.Errorf("%w: %q", ErrUnsafePath, file.Path)
		}
		if seen[file.Path] || file.Size < 0 {
			return fmt.Errorf("%w: entry %q listed twice or with size %d", ErrCorruptManifest, file.Path, file.Size)
		}
		seen[file.Path] = true
		switch file.Kind {
		case KindFormat, KindSegment, KindCheckpoint, KindMetadata:
		default:
			return fmt.Errorf("%w: file %q has kind %q", ErrCorruptManifest, file.Path, file.Kind)
		}
	}
	return nil
}

// safePath accepts a clean, relative, slash-separated path that stays
// inside the directory it is joined to.
func safePath(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsAny(name, "\\\x00") || path.Clean(name) != name {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." || part == "." {
			return false
		}
	}
	return true
}
