// Package backup is the format of djinn's snapshot files: a consistent copy
// of a cluster's replicated state, written while the cluster runs (djinn
// snapshot save) and read to seed a new cluster (djinn snapshot restore).
//
// A file is, in order:
//
//	magic     "DJINNSNP" (8 bytes)
//	version   uint32, big-endian: 1
//	header    uint32 length (at most 64 KiB), then a statepb.BackupHeader
//	body      chunks, each a uint32 length (1 B to 1 MiB) and that many
//	          bytes; a zero length ends them
//	checksum  SHA-256 of every byte before it (32 bytes)
//
// and nothing after. The body is the state machine's snapshot stream (the
// records state.Machine writes), chunked so that it is written as it is
// read from the leader's snapshot, never held whole in memory, and read the
// same way. A Reader refuses a file that is not one, of another version,
// truncated, longer than its checksum, or whose checksum does not match,
// saying which; it checks the checksum when the body ends, so a caller that
// reads the body to the end (io.EOF) has read an intact file.
package backup

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The format's constants.
const (
	Magic          = "DJINNSNP"
	Version        = 1
	MaxHeader      = 64 << 10 // bytes
	MaxChunk       = 1 << 20  // bytes
	checksumLength = sha256.Size
)

// Error refuses a file a Reader cannot read: not a snapshot file, of
// another version, truncated or damaged. It is an InvalidArgument. Its text
// names the file once (File, or "the snapshot file"), the byte where the
// problem is, the cause, and what to do next.
type Error struct {
	File    string // the file's name; set with Named by the caller who knows it
	Problem string // "is damaged", "is truncated", "is not a djinn snapshot file", ...
	Offset  int64  // where the problem is; -1 when it is the file as a whole
	Detail  string // the cause, in plain words
	Next    string // what to do
	damage  bool   // truncated or damaged: another copy would do
}

// The next steps of a refused file.
const (
	nextCopy    = "use an intact copy of the file, or save a new snapshot with djinn snapshot save"
	nextFile    = "name a file written by djinn snapshot save"
	nextRelease = "restore it with the djinn release that saved it"
)

func (e *Error) Error() string {
	file := e.File
	if file == "" {
		file = "the snapshot file"
	}
	at := ""
	if e.Offset >= 0 {
		at = fmt.Sprintf(" at byte %d", e.Offset)
	}
	return fmt.Sprintf("%s %s%s: %s; %s", file, e.Problem, at, e.Detail, e.Next)
}

// Is makes the error an InvalidArgument.
func (e *Error) Is(target error) bool { return target == djinn.InvalidArgument }

// Named returns err naming file, if it is an *Error; with next, when not
// empty, as the next step for a truncated or damaged file. Other errors are
// returned as they are.
func Named(err error, file, next string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	named := *e
	named.File = file
	if next != "" && named.damage {
		named.Next = next
	}
	return &named
}

// damaged refuses a file damaged at offset (-1: as a whole).
func damaged(offset int64, format string, args ...any) error {
	return &Error{Problem: "is damaged", Offset: offset, Detail: fmt.Sprintf(format, args...), Next: nextCopy, damage: true}
}

// notSnapshot refuses a file that is not a snapshot file.
func notSnapshot(start []byte) error {
	return &Error{Problem: "is not a djinn snapshot file", Offset: -1,
		Detail: fmt.Sprintf("it starts with %q, not %q", start, Magic), Next: nextFile}
}

// Writer writes a snapshot file: NewWriter writes the opening, Write the
// body, Close the end and the checksum. It is not safe for concurrent use.
type Writer struct {
	w     io.Writer // the file, through the checksum
	sum   hash.Hash
	chunk *bufio.Writer // body bytes, flushed as chunks
	err   error
}

// NewWriter starts a snapshot file with h on w.
func NewWriter(w io.Writer, h *statepb.BackupHeader) (*Writer, error) {
	hb, err := proto.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode snapshot header: %w", err)
	}
	if len(hb) > MaxHeader {
		return nil, fmt.Errorf("snapshot header of %d bytes: longer than %d", len(hb), MaxHeader)
	}
	bw := &Writer{sum: sha256.New()}
	bw.w = io.MultiWriter(w, bw.sum)
	opening := append([]byte(Magic), 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(opening[8:], Version)
	binary.BigEndian.PutUint32(opening[12:], uint32(len(hb)))
	if _, err := bw.w.Write(append(opening, hb...)); err != nil {
		return nil, fmt.Errorf("write snapshot header: %w", err)
	}
	bw.chunk = bufio.NewWriterSize(chunker{bw}, MaxChunk)
	return bw, nil
}

// chunker writes each buffer it is given as chunks.
type chunker struct{ w *Writer }

func (c chunker) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), MaxChunk)
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(k))
		if _, err := c.w.w.Write(l[:]); err != nil {
			return n, err
		}
		if _, err := c.w.w.Write(p[:k]); err != nil {
			return n, err
		}
		n, p = n+k, p[k:]
	}
	return n, nil
}

// Write appends p to the body.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.chunk.Write(p)
	if err != nil {
		w.err = fmt.Errorf("write snapshot body: %w", err)
	}
	return n, w.err
}

// Close ends the body and writes the checksum. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.chunk.Flush(); err != nil {
		w.err = fmt.Errorf("write snapshot body: %w", err)
		return w.err
	}
	if _, err := w.w.Write([]byte{0, 0, 0, 0}); err != nil {
		w.err = fmt.Errorf("write snapshot end: %w", err)
		return w.err
	}
	if _, err := w.w.Write(w.sum.Sum(nil)); err != nil {
		w.err = fmt.Errorf("write snapshot checksum: %w", err)
		return w.err
	}
	w.err = errors.New("snapshot file closed")
	return nil
}

// Reader reads a snapshot file: NewReader reads and checks its opening,
// Read gives the body, and the body's end is io.EOF only once the checksum
// matched and nothing follows it.
type Reader struct {
	r      *bufio.Reader
	sum    hash.Hash
	header *statepb.BackupHeader
	offset int64 // bytes read from the file
	left   int   // bytes left in the current chunk
	err    error // once set, every Read returns it
}

// NewReader reads the opening of a snapshot file from r.
func NewReader(r io.Reader) (*Reader, error) {
	br := &Reader{r: bufio.NewReaderSize(r, 1<<16), sum: sha256.New()}
	var opening [16]byte
	if err := br.full(opening[:]); err != nil {
		if n := min(int(br.offset), len(Magic)); string(opening[:n]) != Magic[:n] {
			return nil, notSnapshot(opening[:n])
		}
		return nil, br.short("opening", err)
	}
	if string(opening[:8]) != Magic {
		return nil, notSnapshot(opening[:8])
	}
	if v := binary.BigEndian.Uint32(opening[8:]); v != Version {
		return nil, &Error{Problem: fmt.Sprintf("is of format version %d", v), Offset: -1,
			Detail: fmt.Sprintf("this djinn reads version %d", Version), Next: nextRelease}
	}
	n := binary.BigEndian.Uint32(opening[12:])
	if n > MaxHeader {
		return nil, damaged(12, "its header claims %d bytes, more than the %d a header may have", n, MaxHeader)
	}
	hb := make([]byte, n)
	if err := br.full(hb); err != nil {
		return nil, br.short("header", err)
	}
	br.header = &statepb.BackupHeader{}
	if err := proto.Unmarshal(hb, br.header); err != nil {
		return nil, damaged(16, "its header does not decode (%v)", err)
	}
	if _, err := djinn.IDFromBytes("snapshot service id", br.header.GetServiceId()); err != nil {
		return nil, damaged(16, "its header names no cluster (%v)", err)
	}
	return br, nil
}

// Header returns the file's header.
func (r *Reader) Header() *statepb.BackupHeader { return r.header }

// full reads exactly len(p) bytes into p, counting them in the checksum.
func (r *Reader) full(p []byte) error {
	n, err := io.ReadFull(r.r, p)
	r.sum.Write(p[:n])
	r.offset += int64(n)
	return err
}

// short explains a read of what that failed: a file that ends too soon is
// truncated; any other error (of the file system, or of the stream the file
// comes from) is returned as it is.
func (r *Reader) short(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Problem: "is truncated", Offset: r.offset, Next: nextCopy, damage: true,
			Detail: fmt.Sprintf("it ends there, inside its %s (the copy is incomplete)", what)}
	}
	return err
}

// Read reads body bytes. At the body's end it checks the checksum: io.EOF
// means the whole file was intact.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.left == 0 {
		if r.err = r.nextChunk(); r.err != nil {
			return 0, r.err
		}
	}
	k := min(len(p), r.left)
	if err := r.full(p[:k]); err != nil {
		r.err = r.short("body", err)
		return 0, r.err
	}
	r.left -= k
	return k, nil
}

// nextChunk reads the next chunk's length, or the end and the checksum
// (io.EOF when they check out).
func (r *Reader) nextChunk() error {
	var l [4]byte
	if err := r.full(l[:]); err != nil {
		return r.short("body", err)
	}
	n := binary.BigEndian.Uint32(l[:])
	if n > MaxChunk {
		return damaged(r.offset-4, "a chunk claims %d bytes, more than the %d a chunk may have", n, MaxChunk)
	}
	if n > 0 {
		r.left = int(n)
		return nil
	}
	want := r.sum.Sum(nil)
	var got [checksumLength]byte
	n2, err := io.ReadFull(r.r, got[:])
	r.offset += int64(n2)
	if err != nil {
		return r.short("checksum", err)
	}
	if string(got[:]) != string(want) {
		return damaged(-1, "checksum mismatch: its contents give SHA-256 %x…, its checksum says %x…", want[:8], got[:8])
	}
	if _, err := r.r.ReadByte(); err == nil {
		return damaged(r.offset, "bytes follow its checksum, which ends the file (two files joined?)")
	}
	return io.EOF
}
