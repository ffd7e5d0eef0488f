package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/logtest"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// TestLogKeysOnce: every line a server logs, the join managers' among
// them (a service's name under joined, the join manager as part and the
// item's id as service), names each key once.
func TestLogKeysOnce(t *testing.T) {
	t.Parallel()
	var buf logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), servertest.Timeout)
	defer cancel()
	s, err := server.Open(ctx, servertest.Config(t), log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	servertest.WaitReady(t, s)
	registered := func() map[string]any {
		for _, line := range buf.Lines() {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "registered" && strings.Contains(line, `"lds"`) {
				return m
			}
		}
		return nil
	}
	servertest.Eventually(t, "the lookup discovery service's registration logged", func() bool { return registered() != nil })
	if m := registered(); m["joined"] != "lds" || m["part"] != "join manager" || !isHexID(m["service"]) {
		t.Errorf("registered: %v, want joined \"lds\", part \"join manager\" and the item's id (32 hex digits) as service", m)
	}
	for _, line := range buf.Lines() {
		if err := keysOnce(line); err != nil {
			t.Errorf("%v in %s", err, line)
		}
	}
}

func isHexID(v any) bool {
	s, ok := v.(string)
	_, err := djinn.ParseID(s)
	return ok && len(s) == 32 && err == nil
}

// keysOnce checks that a JSON log line names each of its keys once.
func keysOnce(line string) error {
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("not a JSON object (%v)", err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		if seen[key] {
			return fmt.Errorf("key %q twice", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
	}
	return nil
}
