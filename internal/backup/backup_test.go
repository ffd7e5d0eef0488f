package backup_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/backup"
	"github.com/djinn-go/djinn/proto/statepb"
)

func header() *statepb.BackupHeader {
	id := djinn.NewID()
	return &statepb.BackupHeader{ServiceId: id[:], NodeId: "n1", Index: 42, Term: 3, SavedUnixNanos: 1e18}
}

// file writes a snapshot file of body.
func file(t testing.TB, body []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := backup.NewWriter(&b, header())
	if err != nil {
		t.Fatal(err)
	}
	// Odd-sized writes: chunking must not depend on them.
	for len(body) > 0 {
		n := min(len(body), 77777)
		if _, err := w.Write(body[:n]); err != nil {
			t.Fatal(err)
		}
		body = body[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func read(b []byte) ([]byte, *statepb.BackupHeader, error) {
	r, err := backup.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(r)
	return body, r.Header(), err
}

func TestRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, backup.MaxChunk - 1, backup.MaxChunk, 3*backup.MaxChunk + 5} {
		body := bytes.Repeat([]byte("djinn"), n/5+1)[:n]
		got, h, err := read(file(t, body))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("%d bytes: read back %d different bytes", n, len(got))
		}
		if h.GetIndex() != 42 || h.GetNodeId() != "n1" {
			t.Fatalf("header %v", h)
		}
	}
}

// TestRefusesDamage: every way a file can be wrong is refused, saying how,
// as an invalid argument; none is read as a good file.
func TestRefusesDamage(t *testing.T) {
	good := file(t, bytes.Repeat([]byte{7}, 5000))
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	version := bytes.Clone(good)
	binary.BigEndian.PutUint32(version[8:], 2)
	bigHeader := bytes.Clone(good)
	binary.BigEndian.PutUint32(bigHeader[12:], backup.MaxHeader+1)
	hlen := int(binary.BigEndian.Uint32(good[12:]))
	bigChunk := bytes.Clone(good)
	binary.BigEndian.PutUint32(bigChunk[16+hlen:], backup.MaxChunk+1)
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"not a snapshot", []byte("hello, this is not a snapshot file at all"), "not a djinn snapshot file"},
		{"another version", version, "version 2"},
		{"a header too long", bigHeader, "its header claims"},
		{"a chunk too long", bigChunk, "a chunk claims"},
		{"truncated in the body", good[:len(good)-100], "truncated"},
		{"truncated in the checksum", good[:len(good)-5], "truncated"},
		{"a byte flipped in the body", flip(len(good) - 40 - 1000), "checksum mismatch"},
		{"a byte flipped in the header", flip(20), ""},
		{"a byte flipped in the checksum", flip(len(good) - 1), "checksum mismatch"},
		{"bytes after the checksum", append(bytes.Clone(good), 0), "follow its checksum"},
		{"two files joined", append(bytes.Clone(good), good...), "follow its checksum"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := read(c.b)
			if err == nil {
				t.Fatal("read as a good file")
			}
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want an invalid argument saying %q", err, c.want)
			}
		})
	}
}

func TestHeaderTooLongToWrite(t *testing.T) {
	h := header()
	h.NodeId = strings.Repeat("x", backup.MaxHeader)
	if _, err := backup.NewWriter(io.Discard, h); err == nil {
		t.Fatal("a header longer than the format allows was written")
	}
}

// FuzzReader: no input makes the reader panic, hang or allocate beyond its
// bounds, and every input it reads to the end ends with the SHA-256 of the
// rest.
func FuzzReader(f *testing.F) {
	f.Add(file(f, nil))
	f.Add(file(f, []byte("a body")))
	f.Add([]byte(backup.Magic))
	h, _ := proto.Marshal(header())
	opening := append([]byte(backup.Magic), 0, 0, 0, 1, 0, 0, 0, byte(len(h)))
	f.Add(append(opening, h...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, err := read(b); err != nil {
			return
		}
		n := len(b) - sha256.Size
		if sum := sha256.Sum256(b[:n]); !bytes.Equal(sum[:], b[n:]) {
			t.Fatalf("read %d bytes as a good file whose checksum does not hold", len(b))
		}
	})
}

// TestRefusalWording: a refused file's error names it once, with the byte
// where the problem is, the cause and the next step; Named gives a
// truncated or damaged file another next step, and leaves other errors as
// they are.
func TestRefusalWording(t *testing.T) {
	good := file(t, []byte("a body"))
	_, _, err := read(good[:20])
	if got, want := err.Error(), "the snapshot file is truncated at byte 20: it ends there, inside its header (the copy is incomplete); "+
		"use an intact copy of the file, or save a new snapshot with djinn snapshot save"; got != want {
		t.Errorf("unnamed:\n%s\nwant\n%s", got, want)
	}
	named := backup.Named(err, "the snapshot the server sent", "save it again")
	if got, want := named.Error(), "the snapshot the server sent is truncated at byte 20: it ends there, inside its header (the copy is incomplete); save it again"; got != want {
		t.Errorf("named:\n%s\nwant\n%s", got, want)
	}
	if !errors.Is(named, djinn.ErrInvalidArgument) {
		t.Errorf("%v: not an invalid argument", named)
	}
	_, _, err = read([]byte("hello, this is not a snapshot"))
	if got, want := backup.Named(err, "x.snap", "save it again").Error(),
		`x.snap is not a djinn snapshot file: it starts with "hello, t", not "DJINNSNP"; name a file written by djinn snapshot save`; got != want {
		t.Errorf("not a snapshot file, named:\n%s\nwant\n%s (the next step of a damaged file only)", got, want)
	}
	other := errors.New("connection reset")
	if backup.Named(other, "x.snap", "") != other {
		t.Error("Named changed an error that is no refusal")
	}
}
