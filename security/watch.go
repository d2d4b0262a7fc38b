package security

import (
	"context"
	"os"
	"slices"
	"time"
)

// fileStamp is what a poll compares: no inotify (portable, and no new
// dependency), just modification time and size.
type fileStamp struct {
	modified int64 // UnixNano: comparable with ==
	size     int64
	missing  bool
}

type fileStamps []fileStamp

func stampFiles(paths []string) fileStamps {
	stamps := make(fileStamps, len(paths))
	for i, path := range paths {
		info, err := os.Stat(path)
		if err != nil {
			stamps[i].missing = true
			continue
		}
		stamps[i] = fileStamp{modified: info.ModTime().UnixNano(), size: info.Size()}
	}
	return stamps
}

// watchFiles calls reload whenever the stamps of files() differ from
// loaded(), checking every interval until ctx ends. A reload that fails
// (say the certificate is replaced but its key not yet) is tried again
// only when the files change again, so the log gets one line per attempt.
func watchFiles(ctx context.Context, interval time.Duration, files func() []string, loaded func() fileStamps, reload func()) {
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var failed fileStamps
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		now := stampFiles(files())
		if slices.Equal(now, loaded()) || slices.Equal(now, failed) {
			continue
		}
		reload()
		if !slices.Equal(stampFiles(files()), loaded()) {
			failed = now // do not retry (and log) every poll until they change again
		} else {
			failed = nil
		}
	}
}
