package replica

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// records captures what an hclog adapter writes, as JSON records.
type records struct{ buf bytes.Buffer }

func (r *records) logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(&r.buf, &slog.HandlerOptions{Level: level, AddSource: true}))
}

func (r *records) all(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(r.buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		out = append(out, m)
	}
	r.buf.Reset()
	return out
}

func TestRaftLogKeepsFieldsAsAttributes(t *testing.T) {
	var rec records
	l := newRaftLog(rec.logger(slog.LevelDebug), "raft")
	l.Info("entering leader state", "leader", hclog.Fmt("node %s", "a"), "term", 3, "mask", hclog.Hex(255), 7, "seven", "dangling")
	got := rec.all(t)
	if len(got) != 1 {
		t.Fatalf("%d records, want 1", len(got))
	}
	r := got[0]
	want := map[string]any{
		"level": "INFO", "msg": "entering leader state", "logger": "raft", "leader": "node a", "term": float64(3),
		"mask": "0xff", "7": "seven", hclog.MissingKey: "dangling",
	}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("%s = %v, want %v (record %v)", k, r[k], v, r)
		}
	}
	src, _ := r["source"].(map[string]any)
	if file, _ := src["file"].(string); !strings.HasSuffix(file, "raftlog_test.go") {
		t.Errorf("source %v: want the caller's file", src)
	}
}

func TestRaftLogLevelFollowsTheHandler(t *testing.T) {
	for _, tt := range []struct {
		handler slog.Level
		written []string
		lowest  hclog.Level
	}{
		{slog.LevelDebug - 4, []string{"trace", "debug", "info", "warn", "error"}, hclog.Trace},
		{slog.LevelDebug, []string{"debug", "info", "warn", "error"}, hclog.Debug},
		{slog.LevelInfo, []string{"info", "warn", "error"}, hclog.Info},
		{slog.LevelWarn, []string{"warn", "error"}, hclog.Warn},
		{slog.LevelError, []string{"error"}, hclog.Error},
	} {
		var rec records
		l := newRaftLog(rec.logger(tt.handler), "raft")
		l.Trace("trace")
		l.Debug("debug")
		l.Info("info")
		l.Warn("warn")
		l.Error("error")
		l.Log(hclog.Off, "never")
		var msgs []string
		for _, r := range rec.all(t) {
			msgs = append(msgs, r["msg"].(string))
		}
		if strings.Join(msgs, " ") != strings.Join(tt.written, " ") {
			t.Errorf("handler at %v wrote %v, want %v", tt.handler, msgs, tt.written)
		}
		if got := l.GetLevel(); got != tt.lowest {
			t.Errorf("handler at %v: GetLevel %v, want %v", tt.handler, got, tt.lowest)
		}
		is := []bool{l.IsTrace(), l.IsDebug(), l.IsInfo(), l.IsWarn(), l.IsError()}
		for i, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
			if is[i] != (lv >= tt.lowest) {
				t.Errorf("handler at %v: Is%v = %v", tt.handler, lv, is[i])
			}
		}
	}
}

func TestRaftLogDerivedLoggers(t *testing.T) {
	var rec records
	root := newRaftLog(rec.logger(slog.LevelDebug), "raft")
	net := root.Named("net").With("peer", "b")
	net.Info("dial")
	wal := net.ResetNamed("wal")
	wal.Info("open")
	r := rec.all(t)
	if r[0]["logger"] != "raft.net" || r[0]["peer"] != "b" || r[1]["logger"] != "wal" || r[1]["peer"] != "b" {
		t.Errorf("records %v: want raft.net and wal, both with peer b", r)
	}
	if got := net.ImpliedArgs(); len(got) != 2 || got[0] != "peer" {
		t.Errorf("ImpliedArgs %v", got)
	}
	if net.Name() != "raft.net" || root.Name() != "raft" {
		t.Errorf("names %q %q", net.Name(), root.Name())
	}
	// SetLevel is shared by the loggers derived from one another.
	net.SetLevel(hclog.Warn)
	root.Info("hidden")
	wal.Warn("shown")
	if r := rec.all(t); len(r) != 1 || r[0]["msg"] != "shown" {
		t.Errorf("after SetLevel(Warn): %v, want only the warning", r)
	}
	if root.GetLevel() != hclog.Warn {
		t.Errorf("GetLevel %v, want warn", root.GetLevel())
	}
}

func TestRaftLogStandardWriter(t *testing.T) {
	var rec records
	l := newRaftLog(rec.logger(slog.LevelDebug), "raft")
	l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[WARN] disk slow\n[DEBUG] detail")
	l.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error}).Print("forced")
	l.StandardLogger(nil).Print("plain")
	var got []string
	for _, r := range rec.all(t) {
		got = append(got, r["level"].(string)+" "+r["msg"].(string))
	}
	if want := "WARN disk slow|DEBUG detail|ERROR forced|INFO plain"; strings.Join(got, "|") != want {
		t.Errorf("standard logger wrote %q, want %q", strings.Join(got, "|"), want)
	}
}

// TestRaftLogRoutineElection: a node's first election is not a warning;
// one after a leader was known is.
func TestRaftLogRoutineElection(t *testing.T) {
	var rec records
	l := newRaftLog(rec.logger(slog.LevelDebug), "raft")
	l.demote = routine
	const msg = "heartbeat timeout reached, starting election"
	l.Warn(msg, "last-leader-addr", "", "last-leader-id", "")
	l.Warn(msg, "last-leader-addr", "127.0.0.1:1", "last-leader-id", "n1")
	l.Warn("other", "last-leader-id", "")
	var got []string
	for _, r := range rec.all(t) {
		got = append(got, r["level"].(string))
	}
	if strings.Join(got, " ") != "INFO WARN WARN" {
		t.Errorf("levels %v, want INFO WARN WARN", got)
	}
}
