package raftmeta

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter hands hashicorp/raft's log lines to a slog.Logger. The
// library is chatty at info (every election step), so the adapter passes
// warn and above unless the slog handler asks for less.
type hclogAdapter struct {
	logger  *slog.Logger
	name    string
	implied []any
	floor   hclog.Level
}

func newHCLogger(logger *slog.Logger) hclog.Logger {
	return &hclogAdapter{logger: logger, floor: hclog.Warn}
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (a *hclogAdapter) enabled(level hclog.Level) bool {
	if level == hclog.Off || (level != hclog.NoLevel && level < a.floor) {
		return false
	}
	return a.logger.Enabled(context.Background(), slogLevel(level))
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if !a.enabled(level) {
		return
	}
	attrs := append(append([]any{"component", a.name}, a.implied...), args...)
	a.logger.Log(context.Background(), slogLevel(level), msg, attrs...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *hclogAdapter) IsTrace() bool                 { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool                 { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool                  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool                  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool                 { return a.enabled(hclog.Error) }
func (a *hclogAdapter) ImpliedArgs() []any            { return a.implied }
func (a *hclogAdapter) Name() string                  { return a.name }
func (a *hclogAdapter) SetLevel(level hclog.Level)    { a.floor = level }
func (a *hclogAdapter) GetLevel() hclog.Level         { return a.floor }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	out := *a
	out.implied = append(append([]any(nil), a.implied...), args...)
	return &out
}

func (a *hclogAdapter) Named(name string) hclog.Logger {
	out := *a
	if out.name != "" {
		name = out.name + "." + name
	}
	out.name = name
	return &out
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	out := *a
	out.name = name
	return &out
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		a.Warn(string(p))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
