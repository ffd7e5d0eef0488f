package kv

import (
	"iter"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The bounds of a page of a listing the Server serves (KVListRequest's
// max): DefaultPageEntries when a paging request leaves max 0, at most
// MaxPageEntries. A page also ends before its KVListResponse passes
// wire.MaxReply, what a client receives by default less room around it.
const (
	DefaultPageEntries = 1000
	MaxPageEntries     = 10000
)

// page bounds what list returns; the zero page is the whole listing,
// unbounded (a listing in process).
type page struct {
	after string // the page starts past this key, as the caller names it ("": from the start)
	max   int    // at most this many entries (0: any)
	// bytes bounds the page's entries and next as a KVListResponse
	// carries them (0: any). With whole the listing is refused past it
	// rather than paged: the request asked for it all in one response.
	bytes int
	whole bool
}

// pageOf returns the page a request asks for: the whole listing when it
// gives neither after nor max (a client that does not page: it would not
// read a next), else a page; both bounded by wire.MaxReply.
func pageOf(req *djinnpb.KVListRequest) (page, error) {
	m := req.GetMax()
	if m < 0 || m > MaxPageEntries {
		return page{}, djinn.Errorf(djinn.InvalidArgument, "max %d: must be 0 to %d (0: %d entries a page, or the whole listing when after is not given either)", m, MaxPageEntries, DefaultPageEntries)
	}
	pg := page{after: req.GetAfter(), max: int(m), bytes: wire.MaxReply}
	switch {
	case pg.after == "" && pg.max == 0:
		pg.whole = true
	case pg.max == 0:
		pg.max = DefaultPageEntries
	}
	return pg, nil
}

// checkAfter checks a page's after against the listing's prefix (both as
// the caller names them).
func (d *DB) checkAfter(prefix, after string) error {
	switch {
	case after == "":
		return nil
	case len(after) > d.maxKey:
		return djinn.Errorf(djinn.InvalidArgument, "after of %d bytes: longer than %d", len(after), d.maxKey)
	case !strings.HasPrefix(after, prefix):
		return djinn.Errorf(djinn.InvalidArgument, "after %q: does not start with prefix %q; pass the next of a page of the same listing", after, prefix)
	}
	return nil
}

// The field numbers of a KVListResponse's entries and next, and of a
// KVEntry's key and value.
const (
	respEntries protowire.Number = 1
	respNext    protowire.Number = 2
	entryKey    protowire.Number = 1
	entryValue  protowire.Number = 2
)

// entrySize is what an entry of key (never empty) and value adds to a
// KVListResponse.
func entrySize(key string, value []byte) int {
	n := protowire.SizeTag(entryKey) + protowire.SizeBytes(len(key))
	if len(value) > 0 {
		n += protowire.SizeTag(entryValue) + protowire.SizeBytes(len(value))
	}
	return protowire.SizeTag(respEntries) + protowire.SizeBytes(n)
}

// nextSize is what a KVListResponse's next naming key adds to it.
func nextSize(key string) int { return protowire.SizeTag(respNext) + protowire.SizeBytes(len(key)) }

// pageFrom returns the page pg of view (internal keys in order, with
// their values), and whether more entries follow it: it ranges over view
// only as far as the page needs, one entry past its end. A page of
// pg.bytes carries at least one entry: an entry past the bound alone is
// refused ResourceExhausted, naming its key and size; a whole listing
// past it is refused, naming its entries and size (view is ranged over to
// its end to count them, keeping none past the bound).
func pageFrom(view iter.Seq2[string, []byte], prefix string, pg page) (es []Entry, more bool, err error) {
	type entry struct {
		key   string // as the caller names it
		value []byte // the DB's own
	}
	var got []entry
	size, n := 0, 0
	for k, v := range view {
		key := userKey(k)
		if pg.whole && pg.bytes > 0 {
			n++
			if size += entrySize(key, v); size <= pg.bytes {
				got = append(got, entry{key, v})
			}
			continue
		}
		if pg.max > 0 && len(got) == pg.max {
			more = true
			break
		}
		size += entrySize(key, v)
		// The page's next, should it end with this entry, names its key.
		if pg.bytes > 0 && size+nextSize(key) > pg.bytes {
			if len(got) == 0 {
				return nil, false, djinn.Errorf(djinn.ResourceExhausted, "key %q: its value of %d bytes makes an entry of %d, past the %d a page holds (what a client receives by default less room around it); Get it with a client whose receive limit is raised, or list past it (after %q)",
					key, len(v), entrySize(key, v), pg.bytes, key)
			}
			more = true
			break
		}
		got = append(got, entry{key, v})
	}
	if pg.whole && pg.bytes > 0 && size > pg.bytes {
		return nil, false, djinn.Errorf(djinn.ResourceExhausted, "prefix %q: its %d entries take %d bytes, past the %d one response holds (what a client receives by default less room around it); list them in pages, giving max and after (kv.Client and djinn kv ls page by themselves; upgrade an older one)",
			prefix, n, size, pg.bytes)
	}
	es = make([]Entry, len(got))
	for i, e := range got {
		es[i] = Entry{Key: e.key, Value: slices.Clone(e.value)}
	}
	return es, more, nil
}
