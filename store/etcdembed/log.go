package etcdembed

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapLogger returns the logger of etcd member name: into c.log, errors only unless Debug.
// While stopping is set, the errors of serving loops ending are debug messages.
func (c *Cluster) zapLogger(name string, stopping *atomic.Bool) *zap.Logger {
	var lvl zapcore.LevelEnabler = zapcore.ErrorLevel
	if c.opts.Debug {
		lvl = zapcore.DebugLevel
	}
	h := c.log.Handler().WithAttrs([]slog.Attr{slog.String("component", "etcd"), slog.String("member", name)})
	return zap.New(&slogCore{h: h, lvl: lvl, stopping: stopping, storageRaced: new(atomic.Bool)})
}

// slogCore is a zapcore.Core that writes into a slog.Handler, for etcd's zap logging.
type slogCore struct {
	h        slog.Handler
	lvl      zapcore.LevelEnabler
	stopping *atomic.Bool // optional
	// storageRaced is set once the member's storage version failed for want of a term
	// (storageVersionMsg): the first time is the known race of a new member, an info; a
	// second would not be, and stays an error.
	storageRaced *atomic.Bool
}

func (s *slogCore) Enabled(l zapcore.Level) bool { return s.lvl.Enabled(l) }

func (s *slogCore) With(fs []zapcore.Field) zapcore.Core {
	return &slogCore{h: s.h.WithAttrs(attrs(fs)), lvl: s.lvl, stopping: s.stopping, storageRaced: s.storageRaced}
}

func (s *slogCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if ent.Message == serveEndedMsg && s.stopping != nil && s.stopping.Load() {
		ent.Level = zapcore.DebugLevel
	}
	if s.enabled(ent.Level) {
		return ce.AddCore(ent, s)
	}
	return ce
}

func (s *slogCore) enabled(l zapcore.Level) bool {
	return s.Enabled(l) && s.h.Enabled(context.Background(), slogLevel(l))
}

func (s *slogCore) Write(ent zapcore.Entry, fs []zapcore.Field) error {
	if ent.Message == storageVersionMsg && s.storageRaced != nil && hasError(fs, errNoTermYet) && s.storageRaced.CompareAndSwap(false, true) {
		// The race of a new member (storageVersionMsg), which etcd mends by itself.
		if ent.Level = zapcore.InfoLevel; !s.enabled(ent.Level) {
			return nil
		}
	}
	r := slog.NewRecord(ent.Time, slogLevel(ent.Level), ent.Message, 0)
	if ent.LoggerName != "" {
		r.AddAttrs(slog.String("logger", ent.LoggerName))
	}
	r.AddAttrs(attrs(fs)...)
	return s.h.Handle(context.Background(), r)
}

func (s *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// hasError reports whether one of fs is an error whose text contains text.
func hasError(fs []zapcore.Field, text string) bool {
	for _, f := range fs {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType && strings.Contains(err.Error(), text) {
			return true
		}
	}
	return false
}

// attrs converts zap fields to slog attributes, in key order.
func attrs(fs []zapcore.Field) []slog.Attr {
	if len(fs) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fs {
		f.AddTo(enc)
	}
	out := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, slog.Any(k, v))
	}
	slices.SortFunc(out, func(a, b slog.Attr) int { return strings.Compare(a.Key, b.Key) })
	return out
}
