package replica

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepair: repair keeps what checks out, says exactly which
// acknowledged entries it dropped, keeps the files it replaced, and the
// node then starts with the entries before the damage.
func TestRepair(t *testing.T) {
	const n = 12
	for _, tc := range []struct {
		name   string
		clean  bool
		damage func(t *testing.T, s segCheck) int64
	}{
		{"middle record, crash", false, middleRecord},
		{"last record, crash", false, lastRecord},
		{"torn tail, clean shutdown", true, tornTail},
		{"last batches zeroed, crash", false, func(t *testing.T, s segCheck) int64 {
			start := s.walk.batchStart(len(s.walk.commits) - 3)
			damageFile(t, s.path, start, func(b []byte) { clear(b[:s.walk.commits[len(s.walk.commits)-1].off+segFrameLen-start]) })
			return start
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeHistory(t, n, 10, 0, 0)
			if !tc.clean {
				crashed(t, dir)
			}
			segs := segments(t, dir)
			_, last := servedRange(segs)
			tc.damage(t, segs[len(segs)-1])
			if _, err := reopen(t, dir, 0); err == nil {
				t.Fatal("a damaged log started")
			}
			rep, err := Repair(dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.LostFirst == 0 || rep.LostLast != last || rep.Last != rep.LostFirst-1 {
				t.Fatalf("report: kept to %d, lost %d to %d; want lost up to %d, kept up to just before:\n%s", rep.Last, rep.LostFirst, rep.LostLast, last, rep)
			}
			if !strings.Contains(rep.String(), "acknowledged: lost to this node") || rep.Saved == "" {
				t.Errorf("the report does not say what was lost and where the old files are:\n%s", rep)
			}
			if _, err := os.Stat(filepath.Join(rep.Saved, "wal")); err != nil {
				t.Errorf("the damaged log was not kept: %v", err)
			}
			got, err := reopen(t, dir, 0)
			if err != nil {
				t.Fatalf("after repair: %v", err)
			}
			if lost := rep.LostLast - rep.LostFirst + 1; got != n-lost {
				t.Errorf("after repair %d commands, want %d: the %d before the damage", got, n-lost, n-lost)
			}
		})
	}
}

// TestRepairSnapshot: a damaged snapshot the log still covers is dropped
// with nothing lost; a healthy directory is left alone.
func TestRepairSnapshot(t *testing.T) {
	const n = 12
	dir := writeSnapshots(t, n, 10, 0, 6)
	rep, err := Repair(dir)
	if err != nil || rep.Saved != "" || len(rep.Found) != 0 {
		t.Fatalf("repair of a healthy directory: %v\n%s", err, rep)
	}
	snap := snapshotsOf(t, dir)[0]
	flipBit(t, filepath.Join(snap.dir, snapStateName), snap.meta.Size-2)
	rep, err = Repair(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LostFirst != 0 || rep.Snapshot != 0 || rep.First != 1 || !strings.Contains(rep.String(), "damaged snapshot") {
		t.Fatalf("report:\n%s\nwant the snapshot dropped, the whole log kept, nothing lost", rep)
	}
	if got, err := reopen(t, dir, 0); err != nil || got != n {
		t.Fatalf("after repair: %d, %v; want %d", got, err, n)
	}
}

// TestRepairRefusesARunningNode: the node's files are locked while it runs.
func TestRepairRefusesARunningNode(t *testing.T) {
	dir := writeHistory(t, 2, 10, 0, 0)
	leading := make(chan struct{}, 1)
	node, err := openSized(dir, 0, newCounter(), leading)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if _, err := Repair(dir); err == nil || !strings.Contains(err.Error(), "stop it first") {
		t.Fatalf("repair of a running node's directory: %v", err)
	}
}

// TestRepairWithTheLogGone: a log whose only segment is gone, which the
// log-end record says held entries, keeps nothing: repair says so and
// what to do instead.
func TestRepairWithTheLogGone(t *testing.T) {
	dir := writeHistory(t, 4, 10, 0, 0)
	crashed(t, dir)
	segs := segments(t, dir)
	if err := os.Remove(segs[0].path); err != nil {
		t.Fatal(err)
	}
	_, err := Repair(dir)
	if err == nil || !strings.Contains(err.Error(), "nothing can be kept") || !strings.Contains(err.Error(), "log-end record") {
		t.Fatalf("repair of a log whose entries are all gone: %v", err)
	}
}

// TestRepairFinishesAnInterruptedRepair: a repair stopped after it moved
// the damaged log aside and before it put the rebuilt one in place leaves
// no log, which a start refuses; the next repair puts the rebuilt log in
// place instead of rebuilding over it, and the node starts with it.
func TestRepairFinishesAnInterruptedRepair(t *testing.T) {
	const n = 12
	dir := writeHistory(t, n, 10, 0, 0)
	crashed(t, dir)
	segs := segments(t, dir)
	middleRecord(t, segs[len(segs)-1])
	rep, err := Repair(dir)
	if err != nil {
		t.Fatal(err)
	}
	kept := n - int(rep.LostLast-rep.LostFirst+1)
	walDir := filepath.Join(dir, "raft", "wal")
	if err := os.Rename(walDir, walDir+".repair"); err != nil {
		t.Fatal(err)
	}
	if _, err := reopen(t, dir, 0); err == nil {
		t.Fatal("started without its log")
	}
	rep, err = Repair(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.String(), "an earlier repair was stopped") {
		t.Errorf("the report does not say it finished the earlier repair:\n%s", rep)
	}
	if got, err := reopen(t, dir, 0); err != nil || got != uint64(kept) {
		t.Fatalf("after the repair was finished: %d commands, %v; want the %d the first repair kept", got, err, kept)
	}
}
