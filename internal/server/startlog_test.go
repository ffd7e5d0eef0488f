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
// itself, serves and closes without a warning or an error in its log; and
// Raft's records come through as structured records, their fields as
// attributes.
func TestSingleNodeStartLogsNoWarning(t *testing.T) {
	t.Parallel()
	rec := &levelRecorder{}
	ctx, cancel := context.WithTimeout(context.Background(), servertest.Timeout)
	defer cancel()
	srv, err := server.Open(ctx, servertest.Config(t), slog.New(rec))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	raftFields := false
	for _, r := range rec.records() {
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		if r.Level >= slog.LevelWarn {
			t.Errorf("%v %q %v: a normal start logs no warning", r.Level, r.Message, attrs)
		}
		if attrs["logger"] == "raft" && r.Message == "entering leader state" && attrs["leader"] != "" {
			raftFields = true
		}
	}
	if !raftFields {
		t.Errorf("no Raft record \"entering leader state\" with its leader as an attribute among %d records", len(rec.records()))
	}
}
