package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/djinn-go/djinn/internal/disk"
)

// RepairReport says what Repair found in a node's data directory and what
// it did.
type RepairReport struct {
	// Dir is the data directory.
	Dir string `json:"data_dir"`
	// Saved is where the files Repair replaced or dropped were moved;
	// empty when it changed nothing.
	Saved string `json:"saved,omitempty"`
	// Snapshot is the index of the snapshot the node restores (0: none);
	// First and Last are the log entries it replays after it (0, 0:
	// none).
	Snapshot uint64 `json:"snapshot"`
	First    uint64 `json:"first"`
	Last     uint64 `json:"last"`
	// Found lists the damage found; Dropped says what was dropped,
	// naming the entries and whether they had been acknowledged.
	Found   []string `json:"found,omitempty"`
	Dropped []string `json:"dropped,omitempty"`
	// LostFirst and LostLast are the acknowledged log entries dropped
	// (0, 0: none).
	LostFirst uint64 `json:"lost_first,omitempty"`
	LostLast  uint64 `json:"lost_last,omitempty"`
}

// String describes the report for an operator.
func (r RepairReport) String() string {
	var b strings.Builder
	if len(r.Found) == 0 && r.Saved == "" {
		fmt.Fprintf(&b, "%s: no damage found; nothing changed", r.Dir)
		return b.String()
	}
	for _, f := range r.Found {
		fmt.Fprintf(&b, "found: %s\n", f)
	}
	for _, d := range r.Dropped {
		fmt.Fprintf(&b, "dropped: %s\n", d)
	}
	if r.Saved != "" {
		fmt.Fprintf(&b, "the files replaced or dropped are kept in %s\n", r.Saved)
	}
	fmt.Fprintf(&b, "kept: %s", r.kept())
	return b.String()
}

func (r RepairReport) kept() string {
	var parts []string
	if r.Snapshot > 0 {
		parts = append(parts, fmt.Sprintf("the snapshot at index %d", r.Snapshot))
	}
	if r.Last > 0 {
		parts = append(parts, entries(r.First, r.Last))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", then ")
}

// Repair makes the node data directory dataDir, whose node must not be
// running, start again: it keeps the newest snapshot that checks out and
// the log entries that check out up to the first damage and follow on
// from that snapshot, and drops the rest, moving every file it replaces
// into a damaged-N directory beside. Raft's term and vote, where the log's
// metadata holds older ones than the term record (termvote.go), are
// written back into it from the record. The report names what was dropped;
// acknowledged writes in it are lost to this node. Use it only when no
// backup or healthy peer holds the data: a member of a cluster that lost
// entries is better replaced.
func Repair(dataDir string) (RepairReport, error) {
	rep := RepairReport{Dir: dataDir}
	raftDir := filepath.Join(dataDir, "raft")
	walDir := filepath.Join(raftDir, "wal")
	if _, err := os.Stat(raftDir); err != nil {
		return rep, fmt.Errorf("data directory %s: %w", dataDir, err)
	}
	finished, err := finishInterruptedRepair(walDir)
	if err != nil {
		return rep, fmt.Errorf("data directory %s: %w", dataDir, err)
	}
	if finished {
		rep.Found = append(rep.Found, "an earlier repair was stopped before it put the log it rebuilt in place: it is now in "+walDir)
	}
	clean, wasClean, err := readCleanStop(raftDir)
	var d *disk.DamageError
	switch {
	case errors.As(err, &d):
		rep.Found = append(rep.Found, d.Error())
	case err != nil:
		return rep, err
	}
	wc, err := checkWAL(walDir, true)
	if err != nil {
		return rep, err
	}
	sc, err := checkSnapshots(raftDir, true)
	if err != nil {
		return rep, err
	}
	_, recorded, _, err := readLogEnd(raftDir)
	var dl *disk.DamageError
	switch {
	case errors.As(err, &dl):
		rep.Found = append(rep.Found, dl.Error())
	case err != nil:
		return rep, err
	}
	wf, err := findWitness(raftDir, wc)
	if err != nil {
		return rep, err
	}
	tf, err := findTerm(raftDir)
	if err != nil {
		return rep, err
	}
	p := plan(wc, sc, clean, wasClean)
	p.recorded(recorded)
	p.witnessed(wf)
	rep.Found = append(rep.Found, p.found...)
	if tf.damage != nil {
		rep.Found = append(rep.Found, tf.damage.Error()+"; it is moved aside, and the next start records raft's term and vote as the log's metadata holds them")
	}
	rep.Dropped = p.dropped
	rep.Snapshot, rep.First, rep.Last = p.snapshot, p.first, p.last
	rep.LostFirst, rep.LostLast = p.lost[0], p.lost[1]
	if p.empty {
		return rep, fmt.Errorf("data directory %s: nothing can be kept: %s; restore it from a backup, or replace this member of its cluster", dataDir, strings.Join(p.found, "; "))
	}
	if !p.rebuild && len(p.dropSnaps) == 0 && d == nil && dl == nil && wf.damage == nil && !p.staleRecord && tf.damage == nil {
		return rep, restoreTerm(&rep, tf, walDir)
	}
	if rep.Saved, err = freeDir(dataDir); err != nil {
		return rep, err
	}
	if err := p.apply(raftDir, rep.Saved, wc, wf.bad); err != nil {
		return rep, err
	}
	if tf.damage != nil {
		if err := moveAside(filepath.Join(raftDir, termName), rep.Saved); err != nil {
			return rep, err
		}
	}
	// After the log is rebuilt: its metadata is then the new log's.
	return rep, restoreTerm(&rep, tf, walDir)
}

// restoreTerm writes the term record's term and vote back into the log's
// metadata in walDir where it is behind them (termvote.go), and reports
// it.
func restoreTerm(rep *RepairReport, tf termFound, walDir string) error {
	found, err := tf.restore(walDir)
	if found != "" {
		rep.Found = append(rep.Found, found)
	}
	return err
}

// repairPlan is what Repair keeps and drops.
type repairPlan struct {
	found, dropped []string
	dropSnaps      []string  // snapshot directories to move aside
	snapshot       uint64    // the snapshot kept
	first, last    uint64    // the log kept
	lost           [2]uint64 // the acknowledged entries dropped
	rebuild        bool      // the log must be rewritten with first..last
	empty          bool      // nothing can be kept
	staleRecord    bool      // the clean-shutdown record is older than the log
}

func plan(wc walCheck, sc snapCheck, clean cleanStop, wasClean bool) repairPlan {
	var p repairPlan
	for _, s := range sc.snaps {
		switch {
		case s.damage != nil:
			p.found = append(p.found, s.damage.Error())
			p.dropSnaps = append(p.dropSnaps, s.dir)
			p.dropped = append(p.dropped, "the damaged snapshot "+s.dir)
		case p.snapshot == 0:
			p.snapshot = s.meta.Index
		}
	}
	var end uint64 // the last entry the log held, as far as can be told
	p.first, p.last, end = p.logPrefix(wc)
	if wc.stale != nil {
		p.found = append(p.found, wc.stale.Error()+"; the log is rebuilt from its segments")
		p.rebuild = true
	}
	if wasClean && end > clean.LastIndex {
		p.found = append(p.found, fmt.Sprintf("the record of the last clean shutdown says the log ended at entry %d, but it goes on to entry %d: the record is older than the log, and is dropped", clean.LastIndex, end))
		p.staleRecord, wasClean = true, false
	}
	// Damage in the last segment may hide entries after it, unless a clean
	// shutdown recorded where the log ended.
	hidden := len(wc.segs) > 0 && !wasClean && (wc.segs[len(wc.segs)-1].damage != nil || wc.segs[len(wc.segs)-1].after != nil)
	if wasClean && clean.LastIndex > max(end, p.last) {
		p.found = append(p.found, fmt.Sprintf("the node stopped cleanly with its log at entry %d, but the log ends at entry %d", clean.LastIndex, max(end, p.last)))
		end = clean.LastIndex
	}
	switch {
	case p.last > 0 && p.first > p.snapshot+1:
		if p.snapshot == 0 && p.first > 1 {
			p.found = append(p.found, fmt.Sprintf("no snapshot holds the log's entries before %d", p.first))
			p.empty = true
			return p
		}
		p.found = append(p.found, fmt.Sprintf("the log starts at entry %d, after the snapshot kept (index %d): the entries between are missing", p.first, p.snapshot))
		p.first, p.last, p.rebuild = 0, 0, true
	case p.last > 0 && p.last < p.snapshot:
		p.first, p.last, p.rebuild = 0, 0, true // the snapshot holds it all
	}
	if lost := max(p.last, p.snapshot) + 1; end >= lost {
		p.rebuild = true
		p.lost = [2]uint64{lost, end}
		more := ""
		if hidden {
			more = " (and any later ones the damage hides)"
		}
		p.dropped = append(p.dropped, fmt.Sprintf("%s%s, acknowledged: lost to this node", entries(lost, end), more))
	}
	if p.last == 0 && p.snapshot == 0 && end > 0 {
		p.empty = true
	}
	return p
}

// recorded takes the log-end record (logend.go) into account: entries up
// to index reached the disk, so any after what is kept are lost.
func (p *repairPlan) recorded(index uint64) {
	kept := max(p.last, p.snapshot)
	if index <= kept || p.empty {
		return
	}
	p.found = append(p.found, fmt.Sprintf("the log ends at entry %d, but its log-end record says entries up to %d reached the disk", kept, index))
	if kept == 0 {
		p.empty = true
		return
	}
	lost := kept + 1
	if p.lost[1] == 0 {
		p.lost[0] = lost
		p.dropped = append(p.dropped, fmt.Sprintf("%s, acknowledged: lost to this node", entries(lost, index)))
	} else if index > p.lost[1] {
		p.dropped[len(p.dropped)-1] = fmt.Sprintf("%s, acknowledged: lost to this node", entries(p.lost[0], index))
	}
	p.lost[1] = max(p.lost[1], index)
	p.rebuild = true
}

// witnessFound is what Repair finds of the log's witness (witness.go).
type witnessFound struct {
	// damage is the witness damaged or disagreeing with the log's
	// metadata, or the log's loss of entries it witnessed.
	damage *disk.DamageError
	from   uint64 // with the log's loss, the first entry lost; else 0
	bad    bool   // the witness is damaged or wrong: it is moved aside
}

// findWitness checks the checked log of raftDir against its witness.
func findWitness(raftDir string, wc walCheck) (witnessFound, error) {
	w, ok, err := readWitness(raftDir)
	var d *disk.DamageError
	switch {
	case errors.As(err, &d):
		return witnessFound{damage: d, bad: true}, nil
	case err != nil || !ok:
		return witnessFound{}, err
	}
	d, lost := w.check(raftDir, wc)
	f := witnessFound{damage: d, bad: d != nil && !lost}
	if lost {
		f.from = w.BaseIndex
	}
	return f, nil
}

// witnessed takes the log's witness into account: a segment it names
// that the log lost held acknowledged entries from its first index on.
func (p *repairPlan) witnessed(f witnessFound) {
	if f.damage == nil {
		return
	}
	p.found = append(p.found, f.damage.Error())
	kept := max(p.last, p.snapshot)
	if f.from <= kept || p.empty {
		return
	}
	if kept == 0 {
		p.empty = true
		return
	}
	if p.lost[1] == 0 {
		p.lost[0] = kept + 1
		p.dropped = append(p.dropped, "")
	}
	p.lost[1] = max(p.lost[1], f.from)
	p.dropped[len(p.dropped)-1] = fmt.Sprintf("%s and any later ones the lost segment held, acknowledged: lost to this node", entries(p.lost[0], p.lost[1]))
	p.rebuild = true
}

// entries names the log entries first..last.
func entries(first, last uint64) string {
	if first == last {
		return fmt.Sprintf("log entry %d", first)
	}
	return fmt.Sprintf("log entries %d to %d", first, last)
}

// logPrefix returns the entries of the log that check out, from its first
// up to the first damage, and the last entry the log held as far as its
// segments tell.
func (p *repairPlan) logPrefix(wc walCheck) (first, last, end uint64) {
	broken := false
	for _, s := range wc.segs {
		end = max(end, segEnd(s))
		if broken {
			continue
		}
		n := s.valid
		if s.damage == nil {
			n = s.kept
		}
		if s.damage != nil {
			p.found = append(p.found, s.damage.Error())
		} else if s.after != nil {
			p.found = append(p.found, s.after.Error())
			p.rebuild = true
		}
		lo, hi := s.info.MinIndex, s.info.BaseIndex+uint64(n)-1
		if !s.tail {
			hi = min(hi, s.info.MaxIndex)
		}
		if n > 0 && hi >= lo {
			if first == 0 {
				first = lo
			}
			last = hi
		}
		broken = s.damage != nil
	}
	return first, last, end
}

// segEnd returns the last index a segment held acknowledged, as far as
// it tells: a torn last write's entries never were; a last batch written
// whole that fails its checksum held at least one.
func segEnd(s segCheck) uint64 {
	if !s.tail {
		return s.info.MaxIndex
	}
	n := s.kept
	switch {
	case s.damage != nil && len(s.walk.commits) > 0:
		n = s.walk.commits[len(s.walk.commits)-1].entries
	case s.after != nil:
		n += max(s.cut, 1)
	}
	end := s.held
	if n > 0 {
		end = max(end, s.info.BaseIndex+uint64(n)-1)
	}
	return end
}

// apply carries the plan out: snapshots dropped and a log rewritten are
// moved into saved.
func (p repairPlan) apply(raftDir, saved string, wc walCheck, badWitness bool) error {
	for _, dir := range p.dropSnaps {
		if err := moveInto(dir, filepath.Join(saved, snapDirName)); err != nil {
			return err
		}
	}
	walDir := filepath.Join(raftDir, "wal")
	if p.rebuild {
		if err := rebuildLog(walDir, wc, p.first, p.last); err != nil {
			return err
		}
		if err := moveAside(walDir, saved); err != nil {
			return err
		}
		if err := os.Rename(walDir+".repair", walDir); err != nil {
			return err
		}
	}
	// The log kept may end before the log-end record: the next start
	// makes a new one.
	if err := moveAside(filepath.Join(raftDir, logEndName), saved); err != nil {
		return err
	}
	if badWitness {
		if err := moveAside(filepath.Join(raftDir, witnessName), saved); err != nil {
			return err
		}
	}
	// A log rewritten numbers its segments from the start again: the
	// witness names its newest segment holding entries.
	if err := rewriteWitness(raftDir); err != nil {
		return err
	}
	if p.staleRecord {
		if err := moveInto(filepath.Join(raftDir, shutdownName), saved); err != nil {
			return err
		}
	}
	if err := removeCleanStop(raftDir); err != nil {
		return err
	}
	return disk.SyncDir(raftDir)
}

// moveAside moves path, if there, into the directory into.
func moveAside(path, into string) error {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return moveInto(path, into)
}

// freeDir returns the first damaged-N directory in dataDir that does not
// exist yet.
func freeDir(dataDir string) (string, error) {
	for i := 1; ; i++ {
		d := filepath.Join(dataDir, fmt.Sprintf("damaged-%d", i))
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			return d, nil
		} else if err != nil {
			return "", err
		}
	}
}

// moveInto moves path into the directory into, making it.
func moveInto(path, into string) error {
	if err := os.MkdirAll(into, 0o700); err != nil {
		return err
	}
	if err := os.Rename(path, filepath.Join(into, filepath.Base(path))); err != nil {
		return err
	}
	return disk.SyncDir(filepath.Dir(path))
}
