package replica

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djinn-go/djinn/proto/statepb"
)

// appendHistory starts a node on dir, has it acknowledge n more commands
// of about size bytes one by one, and stops it cleanly.
func appendHistory(t testing.TB, dir string, n, size, segSize int) {
	t.Helper()
	leading := make(chan struct{}, 1)
	node, err := openSized(dir, segSize, newCounter(), leading)
	if err != nil {
		t.Fatal(err)
	}
	<-leading
	for range n {
		cmd := &statepb.Command{Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: strings.Repeat("x", size)}}}
		if _, err := node.Propose(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	if err := node.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCleanShutdownOlderThanLog: a clean-shutdown record older than the
// log (restored from an older copy: the log goes on after it, or its last
// entry is of a later term) is refused naming the record and saying to
// remove it if the log is intact, and repair drops it with nothing lost; a
// record newer than the log still blames the log.
func TestCleanShutdownOlderThanLog(t *testing.T) {
	const first, more = 6, 4
	t.Run("the log goes on after it", func(t *testing.T) {
		dir := writeHistory(t, first, 10, 0, 0)
		record := filepath.Join(dir, "raft", shutdownName)
		old := readFile(t, record)
		appendHistory(t, dir, more, 10, 0)
		writeFile(t, record, old)
		_, err := reopen(t, dir, 0)
		wantRefused(t, err, record, -1)
		wantSaying(t, err, "the record is older than the log", "remove "+record)
		rep, err := Repair(dir)
		if err != nil {
			t.Fatal(err)
		}
		if rep.LostFirst != 0 || !strings.Contains(rep.String(), "older than the log") {
			t.Fatalf("report:\n%s\nwant the record's age found, nothing lost", rep)
		}
		if got, err := reopen(t, dir, 0); err != nil || got != first+more {
			t.Fatalf("after repair: %d commands, %v; want %d", got, err, first+more)
		}
	})
	t.Run("its last entry is of a later term", func(t *testing.T) {
		dir := writeHistory(t, first, 10, 0, 0)
		record := filepath.Join(dir, "raft", shutdownName)
		c, _, err := readCleanStop(filepath.Join(dir, "raft"))
		if err != nil || c.LastTerm == 0 {
			t.Fatalf("record %+v: %v", c, err)
		}
		c.LastTerm--
		writeFile(t, record, c.encode())
		_, err = reopen(t, dir, 0)
		wantRefused(t, err, record, -1)
		wantSaying(t, err, "the record is older than the log", "remove "+record)
	})
	t.Run("newer than the log", func(t *testing.T) {
		dir := writeHistory(t, first, 10, 0, 0)
		c, _, err := readCleanStop(filepath.Join(dir, "raft"))
		if err != nil {
			t.Fatal(err)
		}
		segs := segments(t, dir)
		c.LastIndex += 2
		writeFile(t, filepath.Join(dir, "raft", shutdownName), c.encode())
		_, err = reopen(t, dir, 0)
		wantRefused(t, err, segs[len(segs)-1].path, segs[len(segs)-1].keptEnd)
		wantSaying(t, err, "its last entries are damaged")
	})
}
