package segment

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/ironbus/ironbus/segment/vfs"
)

// ReadDataFormatVersion returns the layout version a data directory's
// FORMAT file records, without taking the lock or opening any log, so an
// installer can ask whether a binary understands a directory a broker is
// serving. A directory without FORMAT is ErrNotFound; an unreadable FORMAT
// is ErrInconsistent.
func ReadDataFormatVersion(fsys vfs.FS, dir string) (int, error) {
	data, err := vfs.ReadFile(fsys, path.Join(dir, formatFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%w: %s has no %s file; it is not an IronBus data directory", ErrNotFound, dir, formatFileName)
	}
	if err != nil {
		return 0, err
	}
	var f formatFile
	if err := json.Unmarshal(data, &f); err != nil || f.Format != "ironbus-data" {
		return 0, fmt.Errorf("%w: %s/%s is unreadable", ErrInconsistent, dir, formatFileName)
	}
	return f.Version, nil
}
