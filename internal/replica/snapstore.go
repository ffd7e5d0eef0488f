package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// snapStore is the node's snapshot store: raft's FileSnapshotStore (whose
// meta.json holds a CRC-64 of the data, checked on every Open), with a
// header written before the state machine's bytes that repeats the
// snapshot's index, term and configuration, so that a meta.json that
// disagrees with its data is found rather than believed.
//
// It lists only the newest snapshot: when the newest does not open, raft
// would silently restore an older one and replay a log that may no longer
// reach back to it. The node refuses to start instead (checkSnapshots
// and the error kept by failure).
type snapStore struct {
	*raft.FileSnapshotStore

	mu sync.Mutex
	// failed is the first error Open returned; guarded by mu.
	failed error
	// dataDir is the node's data directory, for the snapshot failpoint.
	dataDir string
}

var _ raft.SnapshotStore = (*snapStore)(nil)

// snapMagic starts a snapshot's header; its last byte is the version.
const snapMagic = "djinn snapshot\x00\x01"

// snapHeaderLen is the header's length: magic, index, term, configuration
// index, configuration CRC and the header's own CRC.
const snapHeaderLen = len(snapMagic) + 3*8 + 4 + 4

// snapHeader is what a snapshot's header records.
type snapHeader struct {
	Index, Term, ConfIndex uint64
	ConfCRC                uint32
}

func headerOf(meta *raft.SnapshotMeta) snapHeader {
	return snapHeader{Index: meta.Index, Term: meta.Term, ConfIndex: meta.ConfigurationIndex, ConfCRC: confCRC(meta.Configuration)}
}

// confCRC is a checksum of a configuration's servers, in order.
func confCRC(c raft.Configuration) uint32 {
	var b bytes.Buffer
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "%d %q %q\n", s.Suffrage, s.ID, s.Address)
	}
	return crc32.Checksum(b.Bytes(), castagnoli)
}

func (h snapHeader) encode() []byte {
	b := make([]byte, 0, snapHeaderLen)
	b = append(b, snapMagic...)
	b = binary.BigEndian.AppendUint64(b, h.Index)
	b = binary.BigEndian.AppendUint64(b, h.Term)
	b = binary.BigEndian.AppendUint64(b, h.ConfIndex)
	b = binary.BigEndian.AppendUint32(b, h.ConfCRC)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// errNoHeader: the data starts without a header (a snapshot written before
// headers were).
var errNoHeader = errors.New("no header")

// decodeSnapHeader reads a snapshot header from the start of b.
func decodeSnapHeader(b []byte) (snapHeader, error) {
	if len(b) < len(snapMagic) || string(b[:len(snapMagic)]) != snapMagic {
		return snapHeader{}, errNoHeader
	}
	if len(b) < snapHeaderLen {
		return snapHeader{}, fmt.Errorf("header cut short at %d bytes", len(b))
	}
	body := b[:snapHeaderLen-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[snapHeaderLen-4:]) {
		return snapHeader{}, errors.New("header fails its checksum")
	}
	body = body[len(snapMagic):]
	return snapHeader{
		Index:     binary.BigEndian.Uint64(body),
		Term:      binary.BigEndian.Uint64(body[8:]),
		ConfIndex: binary.BigEndian.Uint64(body[16:]),
		ConfCRC:   binary.BigEndian.Uint32(body[24:]),
	}, nil
}

// agrees returns an error saying how the header and meta disagree, if
// they do.
func (h snapHeader) agrees(meta *raft.SnapshotMeta) error {
	if want := headerOf(meta); h != want {
		return fmt.Errorf("its data was taken at index %d, term %d, configuration index %d, but its meta.json says index %d, term %d, configuration index %d (or another configuration)",
			h.Index, h.Term, h.ConfIndex, want.Index, want.Term, want.ConfIndex)
	}
	return nil
}

// Create implements raft.SnapshotStore: it writes the header first.
func (s *snapStore) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration, confIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, conf, confIndex, trans)
	if err != nil {
		return nil, err
	}
	h := snapHeader{Index: index, Term: term, ConfIndex: confIndex, ConfCRC: confCRC(conf)}
	if _, err := sink.Write(h.encode()); err != nil {
		_ = sink.Cancel()
		return nil, err
	}
	if snapshotFailpoint {
		return &stallingSink{SnapshotSink: sink, dataDir: s.dataDir, kind: "install"}, nil
	}
	return sink, nil
}

// stallingSink stalls after its first write while the snapshot
// failpoint's file is present (failpoint_snapshot.go). Its kind is
// "install" (raft copies a snapshot the leader sent into it) unless the
// state machine's Persist says "persist".
type stallingSink struct {
	raft.SnapshotSink
	dataDir string
	kind    string
	wrote   bool
}

func (s *stallingSink) Write(b []byte) (int, error) {
	n, err := s.SnapshotSink.Write(b)
	if !s.wrote {
		s.wrote = true
		stallSnapshot(s.dataDir, s.kind)
	}
	return n, err
}

// List implements raft.SnapshotStore: the newest snapshot only.
func (s *snapStore) List() ([]*raft.SnapshotMeta, error) {
	l, err := s.FileSnapshotStore.List()
	if len(l) > 1 {
		l = l[:1]
	}
	return l, err
}

// Open implements raft.SnapshotStore: it checks the header against the
// metadata and returns the state machine's bytes after it.
func (s *snapStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, s.fail(fmt.Errorf("snapshot %s: %w", id, err))
	}
	head := make([]byte, snapHeaderLen)
	n, err := io.ReadFull(rc, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		rc.Close()
		return nil, nil, s.fail(fmt.Errorf("snapshot %s: %w", id, err))
	}
	h, err := decodeSnapHeader(head[:n])
	if errors.Is(err, errNoHeader) {
		return meta, indexedReader{readCloser{io.MultiReader(bytes.NewReader(head[:n]), rc), rc}, meta.Index}, nil
	}
	if err == nil {
		err = h.agrees(meta)
	}
	if err != nil {
		rc.Close()
		return nil, nil, s.fail(fmt.Errorf("snapshot %s: %w", id, err))
	}
	// The size is of what the reader gives: raft sends that many bytes
	// to a follower that installs the snapshot, which checks the count.
	m := *meta
	m.Size -= int64(snapHeaderLen)
	return &m, indexedReader{rc, meta.Index}, nil
}

// indexedReader is a snapshot's state machine bytes, with the index of
// the last entry the snapshot holds.
type indexedReader struct {
	io.ReadCloser
	index uint64
}

func (s *snapStore) fail(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed == nil {
		s.failed = err
	}
	return err
}

// failure returns the first error Open returned, if any.
func (s *snapStore) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

type readCloser struct {
	io.Reader
	io.Closer
}
