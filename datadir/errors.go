package datadir

import "errors"

// Sentinel errors; each is wrapped with the detail.
var (
	// ErrNoSuchStream marks a stream the catalog does not name.
	ErrNoSuchStream = errors.New("datadir: no such stream")
	// ErrNoSuchLog marks a stream partition with no log on disk.
	ErrNoSuchLog = errors.New("datadir: no such log")
	// ErrNoSuchBinding marks a pattern no binding has.
	ErrNoSuchBinding = errors.New("datadir: no such binding")
	// ErrNoSuchGroup marks a group a log has no checkpoint for.
	ErrNoSuchGroup = errors.New("datadir: no such group")
	// ErrStreamExists marks a create of a stream that exists with other
	// settings.
	ErrStreamExists = errors.New("datadir: stream exists with other settings")
	// ErrOverlap marks a binding some subject would match together with
	// a binding to another stream; it wraps *subject.AmbiguousError.
	ErrOverlap = errors.New("datadir: binding overlaps another")
	// ErrInvalid marks a bad name, pattern or setting.
	ErrInvalid = errors.New("datadir: invalid")
	// ErrDamaged marks a damaged catalog that Options.RefuseDamage refused
	// to fall back from.
	ErrDamaged = errors.New("datadir: the stream catalog is damaged")
	// ErrGroupType marks a change a group of its type does not take.
	ErrGroupType = errors.New("datadir: wrong group type")
	// ErrOutOfRange marks an offset past a log's committed end.
	ErrOutOfRange = errors.New("datadir: offset out of range")
	// ErrReadOnly marks a change asked of a directory opened shared.
	ErrReadOnly = errors.New("datadir: opened shared (read-only)")
)
