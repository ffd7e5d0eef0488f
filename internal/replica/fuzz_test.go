package replica

import (
	"bytes"
	"crypto/hmac"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"
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
