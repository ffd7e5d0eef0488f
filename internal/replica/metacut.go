package replica

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math/bits"
	"os"

	"github.com/djinn-go/djinn/internal/disk"
)

// The metadata file is a bbolt database (go.etcd.io/bbolt v1.3): pages of
// the size its meta pages record. Its first two pages are meta pages: a
// 16-byte page header, then the magic number, version, page size, flags,
// the root bucket (16 bytes), the freelist's page, the high-water page id
// (the pages in use), the transaction id and an FNV-64a checksum of the
// bytes before it, in the machine's byte order. bbolt maps the file and
// faults on a page in use beyond its end.
const (
	boltPageHeader = 16
	boltMetaLen    = 64
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	// The page sizes bbolt could have written the file with (the
	// machine's page size).
	boltMinPage = 1 << 10
	boltMaxPage = 1 << 16
	// The flag of a freelist page, and the page id of none.
	boltFreelistPage = 0x10
	boltNoFreelist   = ^uint64(0)
)

// boltMeta is what a meta page of the metadata file says.
type boltMeta struct {
	pageSize, freelist, pages, txid uint64
}

// readBoltMeta reads the meta page at off; ok is false if it does not
// check out.
func readBoltMeta(r io.ReaderAt, off int64) (m boltMeta, ok bool) {
	b := make([]byte, boltMetaLen)
	if _, err := r.ReadAt(b, off+boltPageHeader); err != nil {
		return m, false
	}
	e := binary.NativeEndian
	h := fnv.New64a()
	h.Write(b[:56])
	if e.Uint32(b) != boltMagic || e.Uint32(b[4:]) != boltVersion || h.Sum64() != e.Uint64(b[56:]) {
		return m, false
	}
	return boltMeta{pageSize: uint64(e.Uint32(b[8:])), freelist: e.Uint64(b[32:]), pages: e.Uint64(b[40:]), txid: e.Uint64(b[48:])}, true
}

// metaCut returns damage when the metadata file at path is cut short:
// empty, or shorter than its two meta pages or than the pages its newest
// meta page has in use; or when the page size it gives is none bbolt
// writes, or its freelist page is none. nil: it is not, or it cannot
// tell (bbolt's own checks then apply).
func metaCut(path string) *disk.DamageError {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	size := st.Size()
	if size == 0 {
		return &disk.DamageError{Path: path, Offset: -1, Problem: "the log's metadata file is empty (0 bytes): it was cut, " +
			"and the list of the log's segments and raft's term and vote with it"}
	}
	// bbolt takes the page size from the first meta page if it checks
	// out, and the newer of the two that do.
	m, ok := readBoltMeta(f, 0)
	pageSize := int64(os.Getpagesize())
	if ok {
		if m.pageSize < boltMinPage || m.pageSize > boltMaxPage || m.pageSize&(m.pageSize-1) != 0 {
			return &disk.DamageError{Path: path, Offset: boltPageHeader, Problem: fmt.Sprintf(
				"the log's metadata file gives page size %d, which no such file has", m.pageSize)}
		}
		pageSize = int64(m.pageSize)
	}
	if m1, ok1 := readBoltMeta(f, pageSize); ok1 && (!ok || m1.txid > m.txid) {
		m, ok = m1, true
	}
	if size < 2*pageSize {
		return &disk.DamageError{Path: path, Offset: size, Problem: fmt.Sprintf(
			"the log's metadata file is cut short: it is %d bytes, too few for its first two pages", size)}
	}
	if !ok {
		return nil
	}
	if hi, need := bits.Mul64(m.pages, uint64(pageSize)); hi != 0 || uint64(size) < need {
		return &disk.DamageError{Path: path, Offset: size, Problem: fmt.Sprintf(
			"the log's metadata file is cut short: it is %d bytes, and it has %d pages of %d bytes in use", size, m.pages, pageSize)}
	}
	if off, ok := freelistOK(f, m, pageSize); !ok {
		return &disk.DamageError{Path: path, Offset: off, Problem: fmt.Sprintf(
			"the log's metadata file's freelist (page %d) is not one, or runs past its pages in use", m.freelist)}
	}
	return nil
}

// freelistOK reports whether the freelist page m names, which bbolt
// reads when it opens the file for writing (as raft-wal does), trusting
// its kind and length, is a freelist within the pages in use; off is
// where it is.
func freelistOK(r io.ReaderAt, m boltMeta, pageSize int64) (off int64, ok bool) {
	if m.freelist == boltNoFreelist {
		return -1, true // bbolt makes it from the pages in use
	}
	if m.freelist < 2 || m.freelist >= m.pages {
		return -1, false
	}
	off = int64(m.freelist) * pageSize
	var h [boltPageHeader + 8]byte
	if _, err := r.ReadAt(h[:], off); err != nil {
		return off, false
	}
	e := binary.NativeEndian
	flags, n, overflow := e.Uint16(h[8:]), uint64(e.Uint16(h[10:])), uint64(e.Uint32(h[12:]))
	// Page ids of 8 bytes after the header; a count of 0xFFFF is in the
	// first of them.
	room := ((overflow+1)*uint64(pageSize) - boltPageHeader) / 8
	if n == 0xFFFF {
		if n = e.Uint64(h[boltPageHeader:]); n >= room {
			return off, false
		}
		n++
	}
	return off, flags&boltFreelistPage != 0 && m.freelist+overflow < m.pages && n <= room
}
