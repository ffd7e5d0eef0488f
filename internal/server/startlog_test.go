package server_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// levelRecorder keeps every record's level, message and attributes.
type levelRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *levelRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *levelRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levelRecorder) WithGroup(string) slog.Handler      { return l }

func (l *levelRecorder) records() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]slog.Record(nil), l.recs...)
}

// TestSingleNodeStartLogsNoWarning: a new single node bootstraps, elects
// itself, serves and closes without a warning or an error in its log, and
// so does its restart on the state it left; Raft's records come through
// as structured records, their fields as attributes.
func TestSingleNodeStartLogsNoWarning(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	for _, start := range []string{"first start", "restart"} {
		raftFields := false
		recs := startAndClose(t, cfg)
		for _, r := range recs {
			attrs := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			if r.Level >= slog.LevelWarn {
				t.Errorf("%s: %v %q %v: a normal start logs no warning", start, r.Level, r.Message, attrs)
			}
			if attrs["logger"] == "raft" && r.Message == "entering leader state" && attrs["leader"] != "" {
				raftFields = true
			}
		}
		if !raftFields {
			t.Errorf("%s: no Raft record \"entering leader state\" with its leader as an attribute among %d records", start, len(recs))
		}
	}
}

// startAndClose opens a server with cfg, waits until it is ready, closes
// it and returns every record it logged.
func startAndClose(t *testing.T, cfg server.Config) []slog.Record {
	t.Helper()
	rec := &levelRecorder{}
	ctx, cancel := context.WithTimeout(context.Background(), servertest.Timeout)
	defer cancel()
	srv, err := server.Open(ctx, cfg, slog.New(rec))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	return rec.records()
}
