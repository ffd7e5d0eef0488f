package replica

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// raftLog is Raft's logger (and its log store's and transport's): an
// hclog.Logger that writes to the node's slog.Logger. Raft's key/value
// arguments stay attributes, its logger name is the attribute "logger",
// and its levels map onto slog's (Trace is LevelDebug-4), so the handler
// — djinn's --log-level — decides what is written, not Raft.
//
// SetLevel raises the floor further for this logger and those derived
// from it (With, Named), as hclog's shared level does; hclog.NoLevel (the
// start) leaves the decision to the handler alone.
type raftLog struct {
	l       *slog.Logger
	name    string
	implied []any
	floor   *atomic.Int32 // an hclog.Level; shared by derived loggers
	// demote, when set, may lower a record's level (routine messages
	// Raft logs as warnings); see routine.
	demote func(level hclog.Level, msg string, args []any) hclog.Level
}

var _ hclog.Logger = (*raftLog)(nil)

// newRaftLog returns an hclog.Logger writing to l under name.
func newRaftLog(l *slog.Logger, name string) *raftLog {
	floor := new(atomic.Int32)
	floor.Store(int32(hclog.NoLevel))
	return &raftLog{l: l, name: name, floor: floor}
}

// slogLevel maps hclog's levels onto slog's.
func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default: // Info, and NoLevel/DefaultLevel as hclog takes them
		return slog.LevelInfo
	}
}

func (r *raftLog) enabled(level hclog.Level) bool {
	if level == hclog.Off {
		return false
	}
	if f := hclog.Level(r.floor.Load()); f != hclog.NoLevel && level < f {
		return false
	}
	return r.l.Enabled(context.Background(), slogLevel(level))
}

// Log writes one record at level with args as attributes.
func (r *raftLog) Log(level hclog.Level, msg string, args ...any) {
	r.log(level, msg, args)
}

func (r *raftLog) log(level hclog.Level, msg string, args []any) {
	if r.demote != nil {
		level = r.demote(level, msg, args)
	}
	if !r.enabled(level) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // skip runtime.Callers, log and the level method
	rec := slog.NewRecord(time.Now(), slogLevel(level), strings.TrimSpace(msg), pcs[0])
	if r.name != "" {
		rec.AddAttrs(slog.String("logger", r.name))
	}
	rec.AddAttrs(attrs(r.implied)...)
	rec.AddAttrs(attrs(args)...)
	_ = r.l.Handler().Handle(context.Background(), rec)
}

// attrs turns hclog's alternating keys and values into attributes. A key
// that is not a string is printed; a value left without a key is kept
// under EXTRA_VALUE_AT_END, as hclog does.
func attrs(args []any) []slog.Attr {
	out := make([]slog.Attr, 0, (len(args)+1)/2)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			out = append(out, slog.Any(hclog.MissingKey, value(args[i])))
			break
		}
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		out = append(out, slog.Any(key, value(args[i+1])))
	}
	return out
}

// value renders hclog's formatting types as hclog does; other values go
// to the handler as they are.
func value(v any) any {
	switch v := v.(type) {
	case hclog.Format:
		if len(v) == 0 {
			return ""
		}
		format, _ := v[0].(string)
		return fmt.Sprintf(format, v[1:]...)
	case hclog.Hex:
		return fmt.Sprintf("0x%x", int(v))
	case hclog.Octal:
		return fmt.Sprintf("0%o", int(v))
	case hclog.Binary:
		return fmt.Sprintf("0b%b", int(v))
	case hclog.Quote:
		return fmt.Sprintf("%q", string(v))
	case hclog.CapturedStacktrace:
		return string(v)
	}
	return v
}

func (r *raftLog) Trace(msg string, args ...any) { r.log(hclog.Trace, msg, args) }
func (r *raftLog) Debug(msg string, args ...any) { r.log(hclog.Debug, msg, args) }
func (r *raftLog) Info(msg string, args ...any)  { r.log(hclog.Info, msg, args) }
func (r *raftLog) Warn(msg string, args ...any)  { r.log(hclog.Warn, msg, args) }
func (r *raftLog) Error(msg string, args ...any) { r.log(hclog.Error, msg, args) }

func (r *raftLog) IsTrace() bool { return r.enabled(hclog.Trace) }
func (r *raftLog) IsDebug() bool { return r.enabled(hclog.Debug) }
func (r *raftLog) IsInfo() bool  { return r.enabled(hclog.Info) }
func (r *raftLog) IsWarn() bool  { return r.enabled(hclog.Warn) }
func (r *raftLog) IsError() bool { return r.enabled(hclog.Error) }

// ImpliedArgs returns the arguments With added.
func (r *raftLog) ImpliedArgs() []any { return append([]any(nil), r.implied...) }

// With returns a logger that adds args to every record.
func (r *raftLog) With(args ...any) hclog.Logger {
	c := *r
	c.implied = append(append([]any(nil), r.implied...), args...)
	return &c
}

// Name returns the logger's name.
func (r *raftLog) Name() string { return r.name }

// Named returns a logger named name under this one's name.
func (r *raftLog) Named(name string) hclog.Logger {
	if r.name != "" {
		name = r.name + "." + name
	}
	return r.ResetNamed(name)
}

// ResetNamed returns a logger named name.
func (r *raftLog) ResetNamed(name string) hclog.Logger {
	c := *r
	c.name = name
	return &c
}

// SetLevel sets the floor of this logger and those derived from it.
func (r *raftLog) SetLevel(level hclog.Level) { r.floor.Store(int32(level)) }

// GetLevel returns the lowest level written: the floor if set, else the
// handler's.
func (r *raftLog) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if r.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

// StandardLogger returns a standard library logger writing to this one.
func (r *raftLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(r.StandardWriter(opts), "", 0)
}

// StandardWriter returns a writer whose lines become records: at the
// level their "[LEVEL]" prefix says when opts infer levels, else at
// opts.ForceLevel, else Info.
func (r *raftLog) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	if opts == nil {
		opts = &hclog.StandardLoggerOptions{}
	}
	return &raftLogWriter{r: r, opts: *opts}
}

type raftLogWriter struct {
	r    *raftLog
	opts hclog.StandardLoggerOptions
}

func (w *raftLogWriter) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		msg := strings.TrimSpace(string(line))
		if msg == "" {
			continue
		}
		level := hclog.Info
		if w.opts.ForceLevel != hclog.NoLevel {
			level = w.opts.ForceLevel
		}
		if w.opts.InferLevels || w.opts.InferLevelsWithTimestamp {
			level, msg = inferLevel(msg, level)
		}
		w.r.log(level, msg, nil)
	}
	return len(p), nil
}

// inferLevel finds a "[LEVEL]" tag in a line (after a timestamp, maybe)
// and returns the level and the rest of the line.
func inferLevel(line string, def hclog.Level) (hclog.Level, string) {
	for tag, l := range map[string]hclog.Level{"[TRACE]": hclog.Trace, "[DEBUG]": hclog.Debug, "[INFO]": hclog.Info, "[WARN]": hclog.Warn, "[ERROR]": hclog.Error, "[ERR]": hclog.Error} {
		if before, after, ok := strings.Cut(line, tag); ok && !strings.Contains(before, "[") {
			return l, strings.TrimSpace(after)
		}
	}
	return def, line
}

// routine lowers to Info the warnings Raft logs on a normal start: a
// node's first election (no leader was ever known) is what starting means,
// not a fault.
func routine(level hclog.Level, msg string, args []any) hclog.Level {
	if level != hclog.Warn || msg != "heartbeat timeout reached, starting election" {
		return level
	}
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == "last-leader-id" && fmt.Sprint(args[i+1]) != "" {
			return level
		}
	}
	return hclog.Info
}
