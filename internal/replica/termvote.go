package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"

	"github.com/djinn-go/djinn/internal/disk"
)

// The term record, raft/term, holds raft's current term and its last vote
// (the term and the candidate) as raft last set them. Raft keeps them in
// its stable store, the log's metadata file wal-meta.db, and relies on
// them once it has acted on them: a node that answered a vote and later
// reads an older term or vote from its store may vote again in a term it
// already voted in, and two leaders of one term can overwrite an entry
// the first one committed. The metadata file is checked against the
// segments it lists (walstale.go), but an older copy of it that lists the
// same segments looks whole: the record catches it.
//
// Raft sets the term and the vote through termStore, which writes the
// record after the store's write succeeded and before it returns to raft,
// one write at a time:
// before raft answers a vote or acts in the new term. The order makes the
// record never ahead of the store unless the store lost a write: a crash
// between the two leaves the record behind the store, which a start
// accepts and brings the record up to. So at a start, a record ahead of
// the store — a later term, or a vote in the store's term that the store
// lacks or holds for another candidate — says the store is older than
// what raft acted on, and the node refuses it; Repair writes the record's
// term and vote back into the store.
//
// Raft sets them in elections only (a new term, a vote), never on the
// write path: one more small fsync each costs nothing there. The record is
// written in place, alternating between two checksummed slots in separate
// disk blocks, as the log-end record is (logend.go), so that a crash while
// one is written leaves the other.

// termName is the term record in the raft directory.
const termName = "term"

// Raft's keys for the term and the vote in its stable store.
const (
	keyCurrentTerm  = "CurrentTerm"
	keyLastVoteTerm = "LastVoteTerm"
	keyLastVoteCand = "LastVoteCand"
)

const (
	termMagic   = "DJTV"
	termVersion = 1
	termHeadLen = 36 // magic, version, 3 zero bytes, sequence, term, vote's term, candidate's length (2 bytes), 2 zero bytes
	termBlock   = 4096
	termLen     = 2 * termBlock               // slot i is at i*termBlock
	termMaxCand = termBlock - termHeadLen - 4 // the candidate, then the CRC
)

// termVote is raft's current term and last vote.
type termVote struct {
	Term     uint64 // the current term
	VoteTerm uint64 // the term of the last vote; 0: none
	VoteFor  []byte // the candidate voted for in VoteTerm
}

func (v termVote) String() string {
	if v.VoteTerm == 0 {
		return fmt.Sprintf("term %d, no vote", v.Term)
	}
	return fmt.Sprintf("term %d, a vote for %q in term %d", v.Term, v.VoteFor, v.VoteTerm)
}

func (v termVote) equal(o termVote) bool {
	return v.Term == o.Term && v.VoteTerm == o.VoteTerm && bytes.Equal(v.VoteFor, o.VoteFor)
}

// behind says how the store's term and vote, s, are behind the record's,
// v, in a way raft could act on: a later term, or a vote in the store's
// term that the store does not hold. "": they are not.
func (v termVote) behind(s termVote) string {
	switch {
	case v.Term > s.Term:
		return fmt.Sprintf("term %d is later than the metadata's", v.Term)
	case v.VoteTerm > 0 && v.VoteTerm >= s.Term && (s.VoteTerm != v.VoteTerm || !bytes.Equal(s.VoteFor, v.VoteFor)):
		return fmt.Sprintf("vote in term %d is not the metadata's", v.VoteTerm)
	}
	return ""
}

func encodeTermSlot(seq uint64, v termVote) []byte {
	b := make([]byte, termHeadLen+len(v.VoteFor)+4)
	copy(b, termMagic)
	b[4] = termVersion
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint64(b[16:], v.Term)
	binary.BigEndian.PutUint64(b[24:], v.VoteTerm)
	binary.BigEndian.PutUint16(b[32:], uint16(len(v.VoteFor)))
	n := copy(b[termHeadLen:], v.VoteFor) + termHeadLen
	binary.BigEndian.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
	return b
}

// decodeTermSlot reads one slot: ok is false when it does not check out.
func decodeTermSlot(b []byte) (seq uint64, v termVote, ok bool) {
	if len(b) < termHeadLen+4 || string(b[:4]) != termMagic || b[4] != termVersion || !zeros(b[5:8]) || !zeros(b[34:36]) {
		return 0, v, false
	}
	n := int(binary.BigEndian.Uint16(b[32:]))
	if n > termMaxCand || len(b) < termHeadLen+n+4 ||
		crc32.Checksum(b[:termHeadLen+n], castagnoli) != binary.BigEndian.Uint32(b[termHeadLen+n:]) {
		return 0, v, false
	}
	v = termVote{Term: binary.BigEndian.Uint64(b[16:]), VoteTerm: binary.BigEndian.Uint64(b[24:])}
	if n > 0 {
		v.VoteFor = append([]byte(nil), b[termHeadLen:termHeadLen+n]...)
	}
	return binary.BigEndian.Uint64(b[8:]), v, true
}

// decodeTerm reads the record's bytes: the sequence and the term and vote
// of the newer slot that checks out.
func decodeTerm(b []byte) (seq uint64, v termVote, err error) {
	if len(b) != termLen {
		return 0, v, fmt.Errorf("is %d bytes, want %d", len(b), termLen)
	}
	return newerSlot(b[:termBlock], b[termBlock:], decodeTermSlot)
}

// readTerm reads the record in raftDir: ok is false when there is none (a
// first start, or a data directory from before the record).
func readTerm(raftDir string) (seq uint64, v termVote, ok bool, err error) {
	return readSlots(raftDir, termName, "the record of raft's term and vote", decodeTerm)
}

// readStable reads raft's term and vote from its stable store.
func readStable(s raft.StableStore) (termVote, error) {
	var v termVote
	var err error
	if v.Term, err = s.GetUint64([]byte(keyCurrentTerm)); err != nil {
		return v, err
	}
	if v.VoteTerm, err = s.GetUint64([]byte(keyLastVoteTerm)); err != nil {
		return v, err
	}
	if v.VoteTerm == 0 {
		return v, nil // never voted: no candidate (some stores fail a Get of a key never set)
	}
	cand, err := s.Get([]byte(keyLastVoteCand))
	if len(cand) > 0 {
		v.VoteFor = append([]byte(nil), cand...)
	}
	return v, err
}

// termStore is the stable store raft writes: the log's, with the term
// record beside it. Each term and vote raft sets is recorded once the
// log's store holds it and before raft goes on (raft panics when a term
// write fails, and answers no vote when a vote write fails). The
// store's write and the record's are made under one lock, so that the
// record follows the store's writes in their order: raft sets the term
// from its main loop and from heartbeats the transport hands it.
type termStore struct {
	raft.StableStore
	f  *os.File
	mu sync.Mutex // held while a term or a vote is written; guards the fields below
	// seq is the newer slot's sequence, rec what the record holds.
	seq uint64
	rec termVote
	// voting is the term of a vote the store took whose candidate it has
	// not yet (raft writes the vote's term, then its candidate).
	voting uint64
}

var _ raft.StableStore = (*termStore)(nil)

// openTermStore checks the record in raftDir against the term and vote
// of the log's stable store, store, whose file is meta, and opens it: it
// makes the record if there is none (a first start, or a data directory
// from before the record), and brings it up to the store if it is behind
// (a crash between the two writes).
func openTermStore(raftDir, meta string, store raft.StableStore) (*termStore, error) {
	held, err := readStable(store)
	if err != nil {
		return nil, fmt.Errorf("read raft's term and vote in %s: %w", meta, err)
	}
	path := filepath.Join(raftDir, termName)
	seq, rec, ok, err := readTerm(raftDir)
	if err != nil {
		return nil, err
	}
	if ok {
		if why := rec.behind(held); why != "" {
			return nil, &disk.DamageError{Path: meta, Offset: -1, Problem: fmt.Sprintf(
				"the log's metadata holds raft's %s, but %s records %s: the record's %s, so the metadata is older than what raft acted on (an older copy of the file); "+
					"starting on it, this node could vote a second time in a term it already voted in, and two leaders of one term can overwrite acknowledged entries. "+
					"`djinn repair` writes the record's term and vote back into the metadata, losing nothing",
				held, path, rec, why)}
		}
	} else {
		b := make([]byte, termLen)
		copy(b[termBlock:], encodeTermSlot(1, held)) // slot seq%2: the next write goes to the other
		if err := disk.WriteFile(path, b); err != nil {
			return nil, fmt.Errorf("term record %s: %w", path, err)
		}
		seq, rec = 1, held
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("term record %s: %w", path, err)
	}
	s := &termStore{StableStore: store, f: f, seq: seq, rec: rec}
	if !rec.equal(held) {
		s.mu.Lock()
		err = s.writeLocked(held)
		s.mu.Unlock()
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	return s, nil
}

// SetUint64 records the term, and notes a vote's term, once the store
// holds it.
func (s *termStore) SetUint64(key []byte, v uint64) error {
	k := string(key)
	if k != keyCurrentTerm && k != keyLastVoteTerm {
		return s.StableStore.SetUint64(key, v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.StableStore.SetUint64(key, v); err != nil {
		return err
	}
	if k == keyLastVoteTerm {
		s.voting = v // recorded with its candidate
		return nil
	}
	r := s.rec
	r.Term = v
	return s.writeLocked(r)
}

// Set records a vote, once the store holds its candidate.
func (s *termStore) Set(key, v []byte) error {
	if string(key) != keyLastVoteCand {
		return s.StableStore.Set(key, v)
	}
	if len(v) > termMaxCand {
		return fmt.Errorf("term record %s: a candidate of %d bytes, more than the %d it holds", s.f.Name(), len(v), termMaxCand)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.StableStore.Set(key, v); err != nil {
		return err
	}
	return s.writeLocked(termVote{Term: max(s.rec.Term, s.voting), VoteTerm: s.voting, VoteFor: bytes.Clone(v)})
}

// writeLocked writes v into the older slot and fsyncs it.
func (s *termStore) writeLocked(v termVote) error {
	seq := s.seq + 1
	if err := writeSlot(s.f, "term record", seq, encodeTermSlot(seq, v), termBlock); err != nil {
		return err
	}
	s.seq, s.rec = seq, v
	return nil
}

// close closes the record (not the store).
func (s *termStore) close() error { return s.f.Close() }

// stableOf reads raft's term and vote from the log's metadata file at
// meta, without raft-wal (Repair). A file that is not there holds none.
func stableOf(meta string) (termVote, error) {
	var v termVote
	if _, err := os.Stat(meta); errors.Is(err, fs.ErrNotExist) {
		return v, nil
	}
	err := withMeta(meta, true, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(metadb.StableBucket))
		if b == nil {
			return nil
		}
		v.Term = stableUint64(b.Get([]byte(keyCurrentTerm)))
		v.VoteTerm = stableUint64(b.Get([]byte(keyLastVoteTerm)))
		if c := b.Get([]byte(keyLastVoteCand)); len(c) > 0 {
			v.VoteFor = append([]byte(nil), c...)
		}
		return nil
	})
	return v, err
}

// stableUint64 decodes a number as raft-wal stores it; 0 if it is not one.
func stableUint64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// restoreStable writes the term and vote v into the log's metadata in
// walDir where the store's, s, are behind them: the later term, and v's
// vote unless the store's is in a later term.
func restoreStable(walDir string, s, v termVote) error {
	meta := filepath.Join(walDir, metadb.FileName)
	if _, err := os.Stat(meta); errors.Is(err, fs.ErrNotExist) {
		// No log's metadata: make it as raft-wal does.
		if err := os.MkdirAll(walDir, 0o700); err != nil {
			return err
		}
		var db metadb.BoltMetaDB
		if _, err := db.Load(walDir); err != nil {
			return fmt.Errorf("make the log's metadata %s: %w", meta, err)
		}
		if err := db.Close(); err != nil {
			return err
		}
	}
	return withMeta(meta, false, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(metadb.StableBucket))
		if err != nil {
			return err
		}
		var n [8]byte
		if v.Term > s.Term {
			binary.LittleEndian.PutUint64(n[:], v.Term)
			if err := b.Put([]byte(keyCurrentTerm), bytes.Clone(n[:])); err != nil {
				return err
			}
		}
		if v.VoteTerm > 0 && v.VoteTerm >= s.VoteTerm {
			binary.LittleEndian.PutUint64(n[:], v.VoteTerm)
			if err := b.Put([]byte(keyLastVoteTerm), bytes.Clone(n[:])); err != nil {
				return err
			}
			return b.Put([]byte(keyLastVoteCand), bytes.Clone(v.VoteFor))
		}
		return nil
	})
}

// termFound is what Repair finds of the term record.
type termFound struct {
	rec    termVote
	ok     bool              // a record that checks out is there
	damage *disk.DamageError // the record does not check out: it is moved aside
}

// findTerm reads the term record in raftDir for Repair.
func findTerm(raftDir string) (termFound, error) {
	_, v, ok, err := readTerm(raftDir)
	var d *disk.DamageError
	if errors.As(err, &d) {
		return termFound{damage: d}, nil
	}
	return termFound{rec: v, ok: ok}, err
}

// restore writes the record's term and vote into the log's metadata in
// walDir if it is behind them, and says what it found; "": nothing.
func (f termFound) restore(walDir string) (string, error) {
	if !f.ok {
		return "", nil
	}
	meta := filepath.Join(walDir, metadb.FileName)
	s, err := stableOf(meta)
	if err != nil {
		return "", err
	}
	why := f.rec.behind(s)
	if why == "" {
		return "", nil
	}
	if err := restoreStable(walDir, s, f.rec); err != nil {
		return "", fmt.Errorf("write raft's term and vote into %s: %w", meta, err)
	}
	return fmt.Sprintf("%s holds raft's %s, but the term record %s holds %s (the record's %s: the metadata is older than what raft acted on); "+
		"the record's term and vote are written back into the metadata", meta, s, filepath.Join(filepath.Dir(walDir), termName), f.rec, why), nil
}
