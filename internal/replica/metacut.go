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
// faults on a page in use beyond its end. A page header is the page's id
// (bbolt frees and rewrites the page the header names), its flags (its
// kind), a count and how many pages it runs over after its first. The
// freelist page lists the ids of the pages free; with a count of 0xFFFF
// the first id is the count.
const (
	boltPageHeader = 16
	boltMetaLen    = 64
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	// The page sizes bbolt could have written the file with (the
	// machine's page size).
	boltMinPage = 1 << 10
	boltMaxPage = 1 << 16

	boltFreelistFlag  = 0x10
	boltNoFreelist    = ^uint64(0) // a file whose freelist bbolt rebuilds from its tree when it opens it
	boltCountOverflow = 0xFFFF
)

// boltMeta is what a meta page of the metadata file says.
type boltMeta struct {
	pageSize, root, freelist, pages, txid uint64
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
	return boltMeta{pageSize: uint64(e.Uint32(b[8:])), root: e.Uint64(b[16:]), freelist: e.Uint64(b[32:]), pages: e.Uint64(b[40:]), txid: e.Uint64(b[48:])}, true
}

// metaCut returns damage when the metadata file at path is cut short:
// empty, or shorter than its two meta pages or than the pages its newest
// meta page has in use; or when the page size it gives is none bbolt
// writes. nil: it is not, or it cannot tell (bbolt's own checks then
// apply).
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
	m0, ok0 := readBoltMeta(f, 0)
	if ok0 && (m0.pageSize < boltMinPage || m0.pageSize > boltMaxPage || m0.pageSize&(m0.pageSize-1) != 0) {
		return &disk.DamageError{Path: path, Offset: boltPageHeader, Problem: fmt.Sprintf(
			"the log's metadata file gives page size %d, which no such file has", m0.pageSize)}
	}
	m, pageSize, ok := newestBoltMeta(f)
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
	return nil
}

// newestBoltMeta reads the meta page bbolt goes by, and the page size: as
// bbolt does, the page size from the first meta page if it checks out
// (the machine's if not), and the newer of the two that do.
func newestBoltMeta(r io.ReaderAt) (m boltMeta, pageSize int64, ok bool) {
	m, ok = readBoltMeta(r, 0)
	pageSize = int64(os.Getpagesize())
	if ok {
		pageSize = int64(m.pageSize)
	}
	if m1, ok1 := readBoltMeta(r, pageSize); ok1 && (!ok || m1.txid > m.txid) {
		m, ok = m1, true
	}
	return m, pageSize, ok
}

// metaTree returns damage when the pages of the metadata file at path,
// which metaCut found whole, do not make the structure bbolt follows
// trusting it: its freelist is not one (freelistOf), or its buckets'
// pages are not a tree (boltTree), or the freelist lists a page of the
// tree. It is read with the file locked against a server's writes (a
// page of the tree it read may be written again after the next write).
func metaTree(path string) *disk.DamageError {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	m, pageSize, ok := newestBoltMeta(f)
	if !ok {
		return nil
	}
	free, d := freelistOf(f, path, m, pageSize)
	if d != nil {
		return d
	}
	t := &boltTree{r: f, path: path, pageSize: pageSize, pages: m.pages, seen: map[uint64]bool{}}
	if d := t.tree(m.root, 0); d != nil {
		return d
	}
	for _, id := range free {
		if t.seen[id] {
			return &disk.DamageError{Path: path, Offset: int64(id) * pageSize, Problem: fmt.Sprintf(
				"the log's metadata file lists page %d as free, but its structure holds it: bbolt would write over it", id)}
		}
	}
	return nil
}

// freelistOf returns the pages free in the freelist page the newest meta
// page m gives, or damage when it is not a freelist within the pages in
// use listing pages in use (not the meta pages). bbolt reads it, trusting
// it, when it opens the file to write, as raft-wal does: it panics on a
// page of another kind, runs out of memory on a count that is not one,
// and would write over a page it takes for free. The file's length is
// already checked against m's pages in use.
func freelistOf(r io.ReaderAt, path string, m boltMeta, pageSize int64) ([]uint64, *disk.DamageError) {
	if m.freelist == boltNoFreelist {
		return nil, nil
	}
	if m.freelist < 2 || m.freelist >= m.pages {
		return nil, &disk.DamageError{Path: path, Offset: -1, Problem: fmt.Sprintf(
			"the log's metadata file gives page %d as its freelist, not one of its %d pages in use after its meta pages", m.freelist, m.pages)}
	}
	off := int64(m.freelist) * pageSize
	h := make([]byte, boltPageHeader+8)
	if _, err := r.ReadAt(h, off); err != nil {
		return nil, nil
	}
	e := binary.NativeEndian
	damage := func(format string, a ...any) ([]uint64, *disk.DamageError) {
		return nil, &disk.DamageError{Path: path, Offset: off,
			Problem: fmt.Sprintf("the log's metadata file's freelist, page %d, ", m.freelist) + fmt.Sprintf(format, a...)}
	}
	if flags := e.Uint16(h[8:]); flags != boltFreelistFlag {
		return damage("is not a freelist page (its flags are %#x)", flags)
	}
	if got := e.Uint64(h); got != m.freelist {
		return damage("says it is page %d", got)
	}
	over := uint64(e.Uint32(h[12:]))
	if over >= m.pages-m.freelist {
		return damage("runs over %d more pages, past its %d pages in use", over, m.pages)
	}
	count, first := uint64(e.Uint16(h[10:])), uint64(0)
	if count == boltCountOverflow {
		count, first = e.Uint64(h[boltPageHeader:]), 1
	}
	if room := (uint64(pageSize)*(over+1)-boltPageHeader)/8 - first; count > room {
		return damage("lists %d free pages, more than the %d it holds", count, room)
	}
	b := make([]byte, count*8)
	if _, err := r.ReadAt(b, off+boltPageHeader+int64(first)*8); err != nil {
		return nil, nil
	}
	ids := make([]uint64, count)
	for i := range ids {
		if ids[i] = e.Uint64(b[i*8:]); ids[i] < 2 || ids[i] >= m.pages {
			return damage("lists page %d as free, not one of its %d pages in use after its meta pages", ids[i], m.pages)
		}
	}
	return ids, nil
}

// bbolt's pages of a tree, and its leaf entries: a page holds count
// elements of 16 bytes after its header, each giving where its key (and
// a leaf's value) is from the element on. A branch element gives the page
// of its child; a leaf element flagged as a bucket holds the bucket's root
// page, or 0 and the bucket's one leaf page inline after it.
const (
	boltBranchFlag = 0x01
	boltLeafFlag   = 0x02
	boltBucketFlag = 0x01 // a leaf element's
	boltElemLen    = 16
	boltBucketLen  = 16 // the root page and the sequence
	boltMaxDepth   = 64 // far deeper than any file of a few buckets
)

// boltTree walks the pages of the file's buckets from the root as bbolt
// follows them, which it does trusting them: an element past its page it
// reads past the memory it mapped; a page that points back to itself it
// follows until its stack overflows, a fatal error nothing recovers.
type boltTree struct {
	r        io.ReaderAt
	path     string
	pageSize int64
	pages    uint64
	seen     map[uint64]bool // the pages the tree holds
}

func (t *boltTree) damage(id uint64, format string, a ...any) *disk.DamageError {
	return &disk.DamageError{Path: t.path, Offset: int64(id) * t.pageSize,
		Problem: fmt.Sprintf("the log's metadata file's page %d ", id) + fmt.Sprintf(format, a...)}
}

// tree checks the tree whose root is page id, depth levels down.
func (t *boltTree) tree(id uint64, depth int) *disk.DamageError {
	if depth > boltMaxDepth {
		return t.damage(id, "is %d levels down its structure: it loops", depth)
	}
	if id < 2 || id >= t.pages {
		return t.damage(id, "is in its structure, but not one of its %d pages in use after its meta pages", t.pages)
	}
	if t.seen[id] {
		return t.damage(id, "is reached twice in its structure")
	}
	h := make([]byte, boltPageHeader)
	if _, err := t.r.ReadAt(h, int64(id)*t.pageSize); err != nil {
		return t.damage(id, "does not read: %v", err)
	}
	if got := binary.NativeEndian.Uint64(h); got != id {
		return t.damage(id, "says it is page %d", got)
	}
	over := uint64(binary.NativeEndian.Uint32(h[12:]))
	if over >= t.pages-id {
		return t.damage(id, "runs over %d more pages, past its %d pages in use", over, t.pages)
	}
	p := make([]byte, (over+1)*uint64(t.pageSize))
	if _, err := t.r.ReadAt(p, int64(id)*t.pageSize); err != nil {
		return t.damage(id, "does not read: %v", err)
	}
	for i := id; i <= id+over; i++ {
		t.seen[i] = true
	}
	return t.node(id, p, depth)
}

// node checks the branch or leaf page p, of page id or inline in it.
func (t *boltTree) node(id uint64, p []byte, depth int) *disk.DamageError {
	e := binary.NativeEndian
	flags, count := e.Uint16(p[8:]), int(e.Uint16(p[10:]))
	if boltPageHeader+count*boltElemLen > len(p) {
		return t.damage(id, "gives %d elements, more than it holds", count)
	}
	switch flags {
	case boltBranchFlag:
		if count == 0 {
			return t.damage(id, "is a branch page of no elements")
		}
		for i := range count {
			at := boltPageHeader + i*boltElemLen
			el := p[at : at+boltElemLen]
			if ksize := uint64(e.Uint32(el[4:])); ksize == 0 || uint64(at)+uint64(e.Uint32(el))+ksize > uint64(len(p)) {
				return t.damage(id, "has a key of %d bytes past its end or of none", ksize)
			}
			if d := t.tree(e.Uint64(el[8:]), depth+1); d != nil {
				return d
			}
		}
	case boltLeafFlag:
		for i := range count {
			at := boltPageHeader + i*boltElemLen
			el := p[at : at+boltElemLen]
			ksize := uint64(e.Uint32(el[8:]))
			start := uint64(at) + uint64(e.Uint32(el[4:])) + ksize
			end := start + uint64(e.Uint32(el[12:]))
			if ksize == 0 || end > uint64(len(p)) {
				return t.damage(id, "has a key or a value past its end, or a key of none")
			}
			if e.Uint32(el)&boltBucketFlag == 0 {
				continue
			}
			v := p[start:end]
			if len(v) < boltBucketLen {
				return t.damage(id, "has a bucket of %d bytes", len(v))
			}
			if root := e.Uint64(v); root != 0 {
				if d := t.tree(root, depth+1); d != nil {
					return d
				}
				continue
			}
			if inline := v[boltBucketLen:]; len(inline) < boltPageHeader || e.Uint16(inline[8:]) != boltLeafFlag {
				return t.damage(id, "has a bucket held inline that is not a leaf page")
			} else if d := t.node(id, inline, depth+1); d != nil {
				return d
			}
		}
	default:
		return t.damage(id, "is in its structure, but not a branch or a leaf page (its flags are %#x)", flags)
	}
	return nil
}
