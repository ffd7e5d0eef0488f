package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"

	"github.com/djinn-go/djinn/internal/disk"
)

// termRecorded returns what raftDir's term record holds.
func termRecorded(t *testing.T, raftDir string) termVote {
	t.Helper()
	_, v, ok, err := readTerm(raftDir)
	if err != nil || !ok {
		t.Fatalf("term record: %v (there: %v)", err, ok)
	}
	return v
}

// metaOf returns the path of dir's log metadata file.
func metaOf(dir string) string { return filepath.Join(dir, "raft", "wal", metadb.FileName) }

// stableIn returns the term and vote the log's metadata in dir holds.
func stableIn(t *testing.T, dir string) termVote {
	t.Helper()
	v, err := stableOf(metaOf(dir))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// setStable writes the term and vote v into the log's metadata in dir,
// as raft-wal stores them, past the term record.
func setStable(t *testing.T, dir string, v termVote) {
	t.Helper()
	err := withMeta(metaOf(dir), false, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(metadb.StableBucket))
		put := func(k string, n uint64) error {
			return b.Put([]byte(k), binary.LittleEndian.AppendUint64(nil, n))
		}
		return errors.Join(put(keyCurrentTerm, v.Term), put(keyLastVoteTerm, v.VoteTerm), b.Put([]byte(keyLastVoteCand), v.VoteFor))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// termAfterStart starts a node on dir, waits until it leads, and returns
// its term; or the error Open returned.
func termAfterStart(t *testing.T, dir string) (uint64, error) {
	t.Helper()
	var term uint64
	err := whileLeading(t, dir, 0, newCounter(), func(n *Node) { term = n.Term() })
	return term, err
}

// recordOrderStore is a stable store that notes, at each write, whether
// the term record already held what is written: it must not, the store
// being written first.
type recordOrderStore struct {
	raft.StableStore
	dir   string
	early []string
	t     *testing.T
}

func (s *recordOrderStore) SetUint64(key []byte, v uint64) error {
	r := termRecorded(s.t, s.dir)
	if (string(key) == keyCurrentTerm && r.Term == v) || (string(key) == keyLastVoteTerm && r.VoteTerm == v) {
		s.early = append(s.early, string(key))
	}
	return s.StableStore.SetUint64(key, v)
}

func (s *recordOrderStore) Set(key, v []byte) error {
	if r := termRecorded(s.t, s.dir); string(key) == keyLastVoteCand && bytes.Equal(r.VoteFor, v) {
		s.early = append(s.early, string(key))
	}
	return s.StableStore.Set(key, v)
}

// TestTermRecordFollowsTheStore: raft's term and vote reach the record
// after the stable store took them and before the write returns to raft
// (so before raft answers a vote); a vote is recorded once its candidate
// is stored. A crash between the two writes leaves the record behind the
// store, never ahead.
func TestTermRecordFollowsTheStore(t *testing.T) {
	dir := t.TempDir()
	inner := &recordOrderStore{StableStore: raft.NewInmemStore(), dir: dir, t: t}
	s, err := openTermStore(dir, "meta", inner)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if err := s.SetUint64([]byte(keyCurrentTerm), 3); err != nil {
		t.Fatal(err)
	}
	if got, want := termRecorded(t, dir), (termVote{Term: 3}); !got.equal(want) {
		t.Fatalf("after the term's write: %v, want %v", got, want)
	}
	if err := s.SetUint64([]byte(keyLastVoteTerm), 3); err != nil {
		t.Fatal(err)
	}
	if got, want := termRecorded(t, dir), (termVote{Term: 3}); !got.equal(want) {
		t.Fatalf("after the vote's term, before its candidate: %v, want %v", got, want)
	}
	if err := s.Set([]byte(keyLastVoteCand), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if got, want := termRecorded(t, dir), (termVote{Term: 3, VoteTerm: 3, VoteFor: []byte("n2")}); !got.equal(want) {
		t.Fatalf("after the vote: %v, want %v", got, want)
	}
	if err := s.Set([]byte("other"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if len(inner.early) > 0 {
		t.Errorf("the record held %v before the store did", inner.early)
	}
}

// TestTermRecordSlots: the record is read from the newer slot that checks
// out, so a crash while one slot is written leaves the other; a record
// with neither, or of another size, is damage.
func TestTermRecordSlots(t *testing.T) {
	rec := func(slots ...[]byte) []byte {
		b := make([]byte, termLen)
		for i, s := range slots {
			copy(b[i*termBlock:], s)
		}
		return b
	}
	v4 := termVote{Term: 4, VoteTerm: 4, VoteFor: []byte("n1")}
	v5 := termVote{Term: 5}
	torn := bytes.Repeat([]byte{0xa5}, termHeadLen+8)
	for _, tc := range []struct {
		name string
		b    []byte
		want termVote
		bad  string
	}{
		{"newer in slot 1", rec(encodeTermSlot(4, v4), encodeTermSlot(5, v5)), v5, ""},
		{"newer in slot 0", rec(encodeTermSlot(6, v4), encodeTermSlot(5, v5)), v4, ""},
		{"slot 0 torn", rec(torn, encodeTermSlot(5, v5)), v5, ""},
		{"slot 1 torn", rec(encodeTermSlot(6, v4), torn), v4, ""},
		{"both torn", rec(torn, torn), termVote{}, "no record that checks out"},
		{"zeros", rec(), termVote{}, "no record that checks out"},
		{"cut short", rec(encodeTermSlot(6, v4))[:termBlock], termVote{}, "is 4096 bytes"},
		{"empty", nil, termVote{}, "is 0 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got, err := decodeTerm(tc.b)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("decoded %v (%v), want an error saying %q", got, err, tc.bad)
				}
				return
			}
			if err != nil || !got.equal(tc.want) {
				t.Fatalf("decoded %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// FuzzTermRecord: the term record's reader never panics, and what it
// reads is what a slot of that sequence, term and vote holds.
func FuzzTermRecord(f *testing.F) {
	b := make([]byte, termLen)
	copy(b, encodeTermSlot(2, termVote{Term: 7, VoteTerm: 7, VoteFor: []byte("node-a")}))
	copy(b[termBlock:], encodeTermSlot(3, termVote{Term: 8}))
	f.Add(b)
	f.Add(b[:termBlock])
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, v, err := decodeTerm(b)
		if err != nil {
			return
		}
		slot := encodeTermSlot(seq, v)
		if !bytes.HasPrefix(b[:termBlock], slot) && !bytes.HasPrefix(b[termBlock:], slot) {
			t.Fatalf("read sequence %d, %v, which neither slot holds", seq, v)
		}
	})
}

// TestOlderWALMetaRefused: the log's metadata put back from a copy taken
// before an election — the same segments, an older term and vote — is
// refused naming it and the term record, where raft would have voted again
// in terms it had voted in (README, Disk damage). Repair writes the
// record's term and vote back, and the node starts in a later term.
func TestOlderWALMetaRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  func(t *testing.T, dir string, now termVote) // makes the metadata older than now
		want string
	}{
		{"a copy from before an election", func(t *testing.T, dir string, _ termVote) {
			meta := metaOf(dir)
			old := readFile(t, meta)
			if _, err := termAfterStart(t, dir); err != nil {
				t.Fatal(err)
			}
			writeFile(t, meta, old)
		}, "is later than the metadata's"},
		{"the term, but not the vote in it", func(t *testing.T, dir string, now termVote) {
			setStable(t, dir, termVote{Term: now.Term, VoteTerm: now.Term - 1, VoteFor: now.VoteFor})
		}, "is not the metadata's"},
		{"a vote in the term for another", func(t *testing.T, dir string, now termVote) {
			setStable(t, dir, termVote{Term: now.Term, VoteTerm: now.Term, VoteFor: []byte("another")})
		}, "is not the metadata's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeHistory(t, 5, 10, 0, 0)
			raftDir := filepath.Join(dir, "raft")
			tc.old(t, dir, stableIn(t, dir))
			rec := termRecorded(t, raftDir)
			if why := rec.behind(stableIn(t, dir)); why == "" {
				t.Fatalf("the metadata (%v) is not behind the record (%v): the test makes nothing to catch", stableIn(t, dir), rec)
			}
			_, err := reopen(t, dir, 0)
			wantRefused(t, err, metaOf(dir), -1)
			for _, want := range []string{filepath.Join(raftDir, termName), rec.String(), tc.want, "vote a second time", "`djinn repair` writes the record's term and vote back"} {
				if err != nil && !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q:\n%v", want, err)
				}
			}

			rep, err := Repair(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(rep.String(), "written back into the metadata") || rep.LostFirst != 0 || len(rep.Dropped) > 0 {
				t.Fatalf("report:\n%s\nwant the term and vote written back, nothing dropped", rep)
			}
			if got := stableIn(t, dir); !got.equal(rec) {
				t.Fatalf("after repair the metadata holds %v, want the record's %v", got, rec)
			}
			if rep, err := Repair(dir); err != nil || len(rep.Found) > 0 {
				t.Fatalf("a second repair: %v\n%s\nwant nothing found", err, rep)
			}
			term, err := termAfterStart(t, dir)
			if err != nil || term <= rec.Term {
				t.Fatalf("after repair: term %d, %v; want a start in a term after %d", term, err, rec.Term)
			}
			if got, err := reopen(t, dir, 0); err != nil || got != 5 {
				t.Fatalf("after repair: %d commands, %v; want 5", got, err)
			}
		})
	}
}

// TestTermRecordHealthyStarts: what a crash or an upgrade leaves starts,
// with the record brought to the metadata's term and vote: a record behind
// the metadata (a crash after the store's write, before the record's; or
// between a vote's term and its candidate), a data directory from before
// the record, a record with one slot torn.
func TestTermRecordHealthyStarts(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, dir string, now termVote)
	}{
		{"a crash between the term's write and the record's", func(t *testing.T, dir string, now termVote) {
			setStable(t, dir, termVote{Term: now.Term + 1, VoteTerm: now.VoteTerm, VoteFor: now.VoteFor})
		}},
		{"a crash between a vote's write and the record's", func(t *testing.T, dir string, now termVote) {
			setStable(t, dir, termVote{Term: now.Term + 1, VoteTerm: now.Term + 1, VoteFor: []byte("another")})
		}},
		{"a crash between a vote's term and its candidate", func(t *testing.T, dir string, now termVote) {
			setStable(t, dir, termVote{Term: now.Term + 1, VoteTerm: now.Term + 1, VoteFor: now.VoteFor})
		}},
		{"no record (an upgrade)", func(t *testing.T, dir string, _ termVote) {
			if err := os.Remove(filepath.Join(dir, "raft", termName)); err != nil {
				t.Fatal(err)
			}
		}},
		{"the newer slot torn", func(t *testing.T, dir string, _ termVote) {
			path := filepath.Join(dir, "raft", termName)
			seq, _, _, err := readTerm(filepath.Dir(path))
			if err != nil {
				t.Fatal(err)
			}
			damageFile(t, path, int64(seq%2)*termBlock, func(b []byte) { clear(b[:termHeadLen]) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeHistory(t, 5, 10, 0, 0)
			raftDir := filepath.Join(dir, "raft")
			now := stableIn(t, dir)
			if rec := termRecorded(t, raftDir); !rec.equal(now) || now.Term < 2 || now.VoteTerm != now.Term || len(now.VoteFor) == 0 {
				t.Fatalf("after a clean stop the record holds %v and the metadata %v: want the same, a term and a vote in it", rec, now)
			}
			tc.do(t, dir, now)
			crashed(t, dir)
			before := stableIn(t, dir)
			term, err := termAfterStart(t, dir)
			if err != nil || term <= before.Term {
				t.Fatalf("started in term %d, %v; want a start in a term after %d", term, err, before.Term)
			}
			if rec, meta := termRecorded(t, raftDir), stableIn(t, dir); !rec.equal(meta) || rec.Term < term {
				t.Fatalf("after the start the record holds %v and the metadata %v: want the same, of term %d or later", rec, meta, term)
			}
		})
	}
}

// TestTermRecordDamagedRefused: a term record with neither slot checking
// out, or of the wrong size, is refused naming it, as the other records
// are; repair moves it aside and the next start makes it again.
func TestTermRecordDamagedRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(path string) error
	}{
		{"both slots flipped", func(path string) error {
			b, err := os.ReadFile(path)
			if err == nil {
				b[20] ^= 1
				b[termBlock+20] ^= 1
				err = os.WriteFile(path, b, 0o600)
			}
			return err
		}},
		{"cut short", func(path string) error { return os.Truncate(path, termBlock) }},
		{"empty", func(path string) error { return os.Truncate(path, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeHistory(t, 5, 10, 0, 0)
			path := filepath.Join(dir, "raft", termName)
			if err := tc.damage(path); err != nil {
				t.Fatal(err)
			}
			_, err := reopen(t, dir, 0)
			wantRefused(t, err, path, -1)
			if !errors.Is(err, disk.ErrDamaged) || !strings.Contains(err.Error(), "the record of raft's term and vote") {
				t.Errorf("the refusal does not say what the file is:\n%v", err)
			}
			rep, err := Repair(dir)
			if err != nil || !strings.Contains(rep.String(), path) || rep.Saved == "" {
				t.Fatalf("repair: %v\n%s\nwant %s found and moved aside", err, rep, path)
			}
			if _, err := os.Stat(filepath.Join(rep.Saved, termName)); err != nil {
				t.Errorf("the damaged record is not kept: %v", err)
			}
			if got, err := reopen(t, dir, 0); err != nil || got != 5 {
				t.Fatalf("after repair: %d commands, %v; want 5", got, err)
			}
			termRecorded(t, filepath.Join(dir, "raft"))
		})
	}
}

// TestRepairWithoutWALMetaKeepsTheVote: the log's metadata gone beside its
// segments, repair rebuilds the log and takes raft's term and vote from
// the term record, not only a term from the log's last entry (README,
// Disk damage).
func TestRepairWithoutWALMetaKeepsTheVote(t *testing.T) {
	dir := writeHistory(t, 5, 10, 0, 0)
	rec := termRecorded(t, filepath.Join(dir, "raft"))
	if err := os.Remove(metaOf(dir)); err != nil {
		t.Fatal(err)
	}
	rep, err := Repair(dir)
	if err != nil || !strings.Contains(rep.String(), "written back into the metadata") || rep.LostFirst != 0 {
		t.Fatalf("repair: %v\n%s\nwant the term and vote written back, nothing lost", err, rep)
	}
	if got := stableIn(t, dir); !got.equal(rec) {
		t.Fatalf("after repair the metadata holds %v, want the record's %v", got, rec)
	}
	if got, err := reopen(t, dir, 0); err != nil || got != 5 {
		t.Fatalf("after repair: %d commands, %v; want 5", got, err)
	}
}
