package replica

import (
	"bytes"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/djinn-go/djinn/internal/disk"
)

// FuzzCleanStop: the clean-shutdown record decodes only from the bytes
// its own encoding makes.
func FuzzCleanStop(f *testing.F) {
	f.Add(cleanStop{LastIndex: 42, LastTerm: 3}.encode())
	f.Add([]byte(shutdownMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCleanStop(b)
		if err != nil {
			return
		}
		if !bytes.Equal(c.encode(), b) {
			t.Fatalf("% x decodes to %+v, which encodes otherwise", b, c)
		}
	})
}

// FuzzSnapHeader: a snapshot header decodes only from the bytes its own
// encoding makes; anything else is no header or a damaged one.
func FuzzSnapHeader(f *testing.F) {
	f.Add(snapHeader{Index: 9, Term: 2, ConfIndex: 1, ConfCRC: 77}.encode())
	f.Add([]byte(snapMagic))
	f.Add([]byte("\x0a\x04some state"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeSnapHeader(b)
		if err != nil {
			if errors.Is(err, errNoHeader) && bytes.HasPrefix(b, []byte(snapMagic)) {
				t.Fatalf("% x starts with the magic but is taken for no header", b)
			}
			return
		}
		if !bytes.Equal(h.encode(), b[:snapHeaderLen]) {
			t.Fatalf("% x decodes to %+v, which encodes otherwise", b, h)
		}
	})
}

// FuzzCheckSegment: whatever a tail segment holds, checking it never
// panics, and what it finds is coherent: frames in order, entries kept
// only from batches that check out, never past what it read.
func FuzzCheckSegment(f *testing.F) {
	dir := writeHistory(f, 5, 10, 0, smallSegments)
	segs := segments(f, dir)
	seg, err := os.ReadFile(segs[0].path)
	if err != nil {
		f.Fatal(err)
	}
	used := int(segs[0].keptEnd) + 64
	f.Add(seg[:used])
	damaged := bytes.Clone(seg[:used])
	damaged[used/2] ^= 2
	f.Add(damaged)
	f.Add(seg[:used-70])
	info := segs[0].info
	f.Fuzz(func(t *testing.T, data []byte) {
		s := segCheck{info: info, tail: true, cutFrom: -1}
		r := bytes.NewReader(data)
		s.walk = walkSegment(r, int64(len(data)), info.BaseIndex)
		if err := s.checkTail(r, int64(len(data))); err != nil {
			t.Fatal(err)
		}
		w := s.walk
		prev := int64(-1)
		for _, c := range w.commits {
			if c.off <= prev || c.off >= w.stop || c.entries > len(w.entries) {
				t.Fatalf("commit %+v out of place (stop %d, %d entries)", c, w.stop, len(w.entries))
			}
			prev = c.off
		}
		if s.keptEnd > int64(len(data)) || s.kept > len(w.entries) || s.valid > len(w.entries) || (s.damage == nil && s.valid != s.kept) {
			t.Fatalf("kept %d entries to %d of %d bytes, %d valid", s.kept, s.keptEnd, len(data), s.valid)
		}
		if s.damage == nil {
			if j := w.firstFailed(len(w.commits) - 1); j >= 0 && w.commits[j].entries <= s.kept && j < len(w.commits)-1 {
				t.Fatalf("commit %d fails its checksum inside what is kept", j)
			}
		}
	})
}

// FuzzReadDialer: whatever a dialer sends the raft port, the acceptor's
// read of it never panics and never hangs; it takes only a message that
// proves the join secret for this handshake's challenge (anything else is
// no proof, or an end when nothing came), and the acceptor's whole side,
// over a connection whose dialer then hangs up or goes silent, ends by its
// deadline at the latest, refusing what proves nothing.
func FuzzReadDialer(f *testing.F) {
	secret := []byte("the cluster's join secret")
	challenge := bytes.Repeat([]byte{7}, challengeSize)
	ours := bytes.Repeat([]byte{9}, challengeSize)
	f.Add(dialerMsg(secret, challenge, ours))
	f.Add(dialerMsg([]byte("another cluster's"), challenge, ours))
	f.Add(append(bytes.Clone(ours), peerProof(secret, acceptorLabel, challenge, ours)...))
	f.Add(dialerMsg(secret, challenge, ours)[:dialerMsgSize-1])
	f.Add([]byte{})
	f.Add([]byte("GET / HTTP/1.1\r\nHost: djinn\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		theirs, err := readDialer(bytes.NewReader(b), secret, challenge)
		valid := len(b) >= dialerMsgSize && hmac.Equal(b[challengeSize:dialerMsgSize], peerProof(secret, dialerLabel, challenge, b[:challengeSize]))
		switch {
		case err == nil && (!valid || !bytes.Equal(theirs, b[:challengeSize])):
			t.Fatalf("% x taken as a proof, the dialer's challenge % x", b, theirs)
		case err != nil && valid:
			t.Fatalf("% x, a proof, refused: %v", b, err)
		case err != nil && len(b) == 0 && !errors.Is(err, io.EOF):
			t.Fatalf("nothing read: %v, want an end", err)
		case err != nil && len(b) > 0 && !errors.Is(err, errNotMember):
			t.Fatalf("% x read: %v, want no proof", b, err)
		}

		for _, hangUp := range []bool{true, false} {
			synctest.Test(t, func(t *testing.T) {
				d, a := net.Pipe()
				defer d.Close()
				acc := &challengedConn{Conn: a, secret: secret, timeout: time.Second}
				go func() {
					if _, err := io.ReadFull(d, make([]byte, challengeSize)); err != nil {
						return
					}
					if len(b) > 0 {
						_, _ = d.Write(b)
					}
					if hangUp {
						d.Close()
					}
					_, _ = io.Copy(io.Discard, d) // until the acceptor closes
				}()
				// The acceptor's challenge is random: b proves nothing for it.
				if err := acc.challenge(); err == nil {
					t.Fatalf("% x taken as a proof for a random challenge", b)
				}
			})
		}
	})
}

// FuzzLogEnd: the log-end record's reader never panics, and what it reads
// is what a slot of that sequence and index holds.
func FuzzLogEnd(f *testing.F) {
	b := make([]byte, logEndLen)
	copy(b, encodeLogEndSlot(2, 9))
	copy(b[logEndBlock:], encodeLogEndSlot(3, 12))
	f.Add(b)
	f.Add(b[:logEndSlotLen])
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, index, err := decodeLogEnd(b)
		if err != nil {
			return
		}
		slot := encodeLogEndSlot(seq, index)
		if !bytes.Equal(b[:logEndSlotLen], slot) && !bytes.Equal(b[logEndBlock:], slot) {
			t.Fatalf("read sequence %d index %d, which neither slot holds", seq, index)
		}
	})
}

// FuzzBoltMeta: a meta page of the log's metadata file is read only when
// it checks out, as what its fields hold; with any one of its bytes
// changed, it does not (the FNV-1a checksum changes with any one byte it
// covers).
func FuzzBoltMeta(f *testing.F) {
	_, b := walMetaOf(f, 5, 0)
	ps := int64(os.Getpagesize())
	f.Add(b[:2*ps], int64(0), byte(1))
	f.Add(b[:2*ps], ps, byte(0x80))
	damaged := bytes.Clone(b[:2*ps])
	damaged[boltPageHeader+40] ^= 1 // its pages in use
	f.Add(damaged, int64(0), byte(1))
	f.Add(b[:boltPageHeader+boltMetaLen-1], int64(0), byte(1))
	f.Add(b[:2*ps], int64(-boltPageHeader), byte(1))
	f.Fuzz(func(t *testing.T, b []byte, off int64, x byte) {
		m, ok := readBoltMeta(bytes.NewReader(b), off)
		if !ok {
			return
		}
		if off < -boltPageHeader || off > int64(len(b))-boltPageHeader-boltMetaLen {
			t.Fatalf("read %+v at %d, outside the %d bytes", m, off, len(b))
		}
		at := off + boltPageHeader
		var fields struct {
			Magic, Version, PageSize, Flags             uint32
			Root, Sequence, Freelist, Pages, TxID, Hash uint64
		}
		if err := binary.Read(bytes.NewReader(b[at:at+boltMetaLen]), binary.NativeEndian, &fields); err != nil {
			t.Fatal(err)
		}
		if fields.Magic != boltMagic || fields.Version != boltVersion ||
			m != (boltMeta{pageSize: uint64(fields.PageSize), root: fields.Root, freelist: fields.Freelist, pages: fields.Pages, txid: fields.TxID}) {
			t.Fatalf("read %+v from a page whose fields are %+v", m, fields)
		}
		if x == 0 {
			x = 1
		}
		for i := at; i < at+boltMetaLen; i++ {
			c := bytes.Clone(b)
			c[i] ^= x
			if m, ok := readBoltMeta(bytes.NewReader(c), off); ok {
				t.Fatalf("byte %d of the page changed (^%#x), read %+v", i-at, x, m)
			}
		}
	})
}

// FuzzWALMeta: whatever the log's metadata file holds, reading its
// segment list never panics, faults or hangs: it is read, or refused as
// damage naming the file; and a file read is one raft-wal opens and
// writes raft's term and its segment list into (as a start and a new
// segment do) without a panic or a fault.
// The file as raft-wal wrote it reads as the segments on disk.
func FuzzWALMeta(f *testing.F) {
	dir, b := walMetaOf(f, 150, smallSegments)
	st, ok, err := readWALMeta(dir)
	files, ferr := segFiles(dir)
	if err != nil || !ok || ferr != nil || len(files) < 3 || len(st.Segments) != len(files) {
		f.Fatalf("%d segments read, %v %v, %d files (%v): want the several on disk", len(st.Segments), ok, err, len(files), ferr)
	}
	for i, s := range st.Segments {
		if s.ID != files[i].id || s.BaseIndex != files[i].base {
			f.Fatalf("segment %d: id %d from %d, the file's %d from %d", i, s.ID, s.BaseIndex, files[i].id, files[i].base)
		}
	}
	ps := os.Getpagesize()
	f.Add(b, false)
	for _, n := range []int{0, 100, ps, 2 * ps, len(b) - ps} {
		f.Add(b[:n], false)
	}
	for _, off := range []int{boltPageHeader + 20, ps + boltPageHeader + 40, 2*ps + 10, len(b) - ps + 20} {
		damaged := bytes.Clone(b)
		damaged[off] ^= 0x10
		f.Add(damaged, false)
		f.Add(damaged, true)
	}
	// Its freelist page not one: only a writable open reads it.
	freelist := bytes.Clone(b)
	freelist[int(binary.NativeEndian.Uint64(b[newestMeta(b)+boltPageHeader+32:]))*ps+8] ^= boltFreelistFlag
	f.Add(freelist, false)
	// resum: the meta pages' checksums made again, so that what they
	// say is taken as they say it.
	f.Fuzz(func(t *testing.T, data []byte, resum bool) {
		if resum && len(data) >= 2*ps {
			data = bytes.Clone(data)
			for _, off := range []int{0, ps} {
				setMeta(data, off, func([]byte) {})
			}
		}
		d := t.TempDir()
		path := filepath.Join(d, metadb.FileName)
		writeFile(t, path, data)
		got, ok, err := readWALMeta(d)
		var dmg *disk.DamageError
		if err != nil && (!errors.As(err, &dmg) || dmg.Path != path) {
			t.Fatalf("%v; want the file read, or refused as damage naming it", err)
		}
		if bytes.Equal(data, b) && (err != nil || !ok || !reflect.DeepEqual(got, st)) {
			t.Fatalf("the file as written reads as %+v, %v, %v; want %+v", got, ok, err, st)
		}
		if err != nil || !ok {
			return
		}
		var db metadb.BoltMetaDB
		if st, err := db.Load(d); err == nil {
			if err := db.SetStable([]byte(keyCurrentTerm), make([]byte, 8)); err != nil {
				t.Logf("raft-wal writes no term into it: %v", err)
			}
			if err := db.CommitState(st); err != nil {
				t.Logf("raft-wal writes no segment list into it: %v", err)
			}
			db.Close()
		}
	})
}

// walMetaOf returns the log directory of a node that acknowledged n
// commands, and its metadata file.
func walMetaOf(t testing.TB, n, segSize int) (dir string, meta []byte) {
	t.Helper()
	dir = filepath.Join(writeHistory(t, n, 1000, 0, segSize), "raft", "wal")
	meta, err := os.ReadFile(filepath.Join(dir, metadb.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return dir, meta
}

// segName is raft-wal's name of a segment file: its base index in 20
// decimal digits, its id in 16 hex digits.
var segName = regexp.MustCompile(`^([0-9]{20})-([0-9a-f]{16})\.wal$`)

// FuzzSegFiles: of the files in a log's directory, segFiles lists those
// raft-wal names as segments, by id, each with the base index and id its
// name gives, and no other.
func FuzzSegFiles(f *testing.F) {
	f.Add("00000000000000000001-0000000000000001.wal/00000000000000000151-0000000000000002.wal/wal-meta.db")
	f.Add("1-1.wal/00000000000000000001-000000000000000A.wal/x.wal/.wal/00000000000000000001-0000000000000001.WAL")
	f.Add("00000000000000000001-0000000000000001.wal /+0000000000000000001-0000000000000001.wal/18446744073709551616-0000000000000001.wal")
	f.Add("00000000000000000009-0000000000000003.wal/00000000000000000001-0000000000000002.wal/18446744073709551615-ffffffffffffffff.wal")
	f.Fuzz(func(t *testing.T, names string) {
		dir := t.TempDir()
		want := map[string][2]uint64{}
		for _, name := range strings.Split(names, "/") {
			if name == "" || name == "." || name == ".." || strings.ContainsRune(name, 0) || len(name) > 255 {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			m := segName.FindStringSubmatch(name)
			if m == nil {
				continue
			}
			base, err := strconv.ParseUint(m[1], 10, 64)
			if err != nil {
				continue // past the largest index
			}
			id, err := strconv.ParseUint(m[2], 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			want[name] = [2]uint64{base, id}
		}
		files, err := segFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i, sf := range files {
			name := filepath.Base(sf.path)
			if w, ok := want[name]; !ok || sf.path != filepath.Join(dir, name) || w != [2]uint64{sf.base, sf.id} {
				t.Fatalf("listed %s as base %d, id %d; want %v (listed: %v)", sf.path, sf.base, sf.id, w, ok)
			}
			if i > 0 && sf.id < files[i-1].id {
				t.Fatalf("%s listed after %s", name, files[i-1].path)
			}
		}
		if len(files) != len(want) {
			t.Fatalf("listed %d files, want %d: %v", len(files), len(want), want)
		}
	})
}

// FuzzSegmentsOf: whatever one segment file of a log holds, under its
// name or another base index's, listing the log's segments — with its
// metadata as written, with a copy of it from before the newer segments,
// or with none — never panics or hangs, and what it lists is a log:
// segments by id, each starting where the one before ends, none sealed
// holding more entries than its file has frames. The files as raft-wal
// wrote them list as the metadata does (a copy older than the segments:
// as the files tell, reported stale; none: the same, with all).
func FuzzSegmentsOf(f *testing.F) {
	dir := writeHistory(f, metaFirst, 1000, 0, smallSegments)
	walDir := filepath.Join(dir, "raft", "wal")
	old := readFile(f, filepath.Join(walDir, metadb.FileName))
	appendHistory(f, dir, metaMore, 1000, smallSegments)
	current := readFile(f, filepath.Join(walDir, metadb.FileName))
	st, _, err := readWALMeta(walDir)
	files, ferr := segFiles(walDir)
	if err != nil || ferr != nil || len(st.Segments) < 3 || len(files) != len(st.Segments) {
		f.Fatalf("%d segments, %d files: %v %v; want several", len(st.Segments), len(files), err, ferr)
	}
	contents := make([][]byte, len(files))
	for i, sf := range files {
		contents[i] = readFile(f, sf.path)
	}
	last := len(files) - 1
	for mode := range uint8(3) {
		for _, all := range []bool{false, true} {
			f.Add(mode, all, uint8(last), contents[last], false, uint64(0))
		}
	}
	f.Add(uint8(1), false, uint8(1), contents[1][:len(contents[1])/2], false, uint64(0))
	f.Add(uint8(2), true, uint8(0), contents[0][:segHeaderLen], false, uint64(0))
	f.Add(uint8(2), true, uint8(last), []byte{}, true, uint64(0))
	f.Add(uint8(1), true, uint8(last), contents[last], true, files[last].base+1)
	f.Fuzz(func(t *testing.T, mode uint8, all bool, which uint8, data []byte, rename bool, base uint64) {
		d := t.TempDir()
		i := int(which) % len(files)
		for j, sf := range files {
			name, b := filepath.Base(sf.path), contents[j]
			if j == i {
				b = data
				if rename {
					name = segment.FileName(types.SegmentInfo{BaseIndex: base, ID: sf.id})
				}
			}
			writeFile(t, filepath.Join(d, name), b)
		}
		mode %= 3
		switch mode {
		case 0:
			writeFile(t, filepath.Join(d, metadb.FileName), current)
		case 1:
			writeFile(t, filepath.Join(d, metadb.FileName), old)
		}
		segs, ok, stale, err := segmentsOf(d, all)
		if err != nil || ok != (mode != 2 || all) {
			t.Fatalf("listed: %v, %v; want a log", ok, err)
		}
		for j, s := range segs {
			if s.SealTime.IsZero() {
				if j != len(segs)-1 {
					t.Fatalf("segment %d of %d (%d) unsealed", j, len(segs), s.ID)
				}
				continue
			}
			if s.MaxIndex+1 < s.BaseIndex || (stale != nil && s.MaxIndex+1-s.BaseIndex > uint64(max(len(data), len(contents[0])))/segFrameLen) {
				t.Fatalf("segment %d from %d to %d", s.ID, s.BaseIndex, s.MaxIndex)
			}
			if j > 0 && (s.ID <= segs[j-1].ID || s.BaseIndex != segs[j-1].MaxIndex+1) {
				t.Fatalf("segment %d from %d after segment %d to %d", s.ID, s.BaseIndex, segs[j-1].ID, segs[j-1].MaxIndex)
			}
		}
		if rename || !bytes.Equal(data, contents[i]) || !ok {
			return
		}
		if (mode == 0) != (stale == nil) {
			t.Fatalf("undamaged, metadata %d: stale %v", mode, stale)
		}
		if len(segs) != len(st.Segments) {
			t.Fatalf("undamaged, metadata %d: %d segments, want %d", mode, len(segs), len(st.Segments))
		}
		for j, s := range segs {
			w := st.Segments[j]
			if s.ID != w.ID || s.BaseIndex != w.BaseIndex || s.MaxIndex != w.MaxIndex || s.SealTime.IsZero() != w.SealTime.IsZero() {
				t.Fatalf("undamaged, metadata %d: segment %d is %+v, want %+v", mode, j, s, w)
			}
		}
	})
}

// FuzzDecodeConfiguration: a configuration entry read from the log (for
// a node id's check) decodes or is refused with an error, never a panic
// or an allocation its bytes do not warrant; what decodes encodes again
// to a configuration that decodes the same.
func FuzzDecodeConfiguration(f *testing.F) {
	f.Add(raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:4163"},
		{Suffrage: raft.Nonvoter, ID: "n2", Address: "[::1]:4163"},
	}}))
	f.Add(raft.EncodeConfiguration(raft.Configuration{}))
	f.Add([]byte{0x81, 0xa7, 'S', 'e', 'r', 'v', 'e', 'r', 's', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		conf, err := decodeConfiguration(b)
		if err != nil {
			return
		}
		again, err := decodeConfiguration(raft.EncodeConfiguration(conf))
		if err != nil || !reflect.DeepEqual(normalConf(again), normalConf(conf)) {
			t.Fatalf("decoded %+v, encoded again decodes to %+v, %v", conf, again, err)
		}
	})
}

// normalConf is a configuration with no servers as nil.
func normalConf(c raft.Configuration) raft.Configuration {
	if len(c.Servers) == 0 {
		c.Servers = nil
	}
	return c
}
