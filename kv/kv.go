package kv

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/participant"
)

// dataPrefix starts the keys of committed data in the participant Store.
const dataPrefix = "kv/"

// Limits on keys and values, unless configured.
const (
	DefaultMaxKeyBytes   = 1024
	DefaultMaxValueBytes = 1 << 20
	// DefaultMaxBytes bounds the bytes of keys and values a DB holds in
	// memory: committed, and written under transactions not yet decided.
	DefaultMaxBytes = 1 << 30
)

// Config configures a DB.
type Config struct {
	// Participant configures the DB's transaction participant: Endpoint,
	// Store and Managers are required; Resource is the DB itself and must
	// be left unset. The Store holds the committed data as well as the
	// prepared records.
	Participant participant.Config
	// MaxKeyBytes and MaxValueBytes bound keys and values (zero: the
	// defaults, 1 KiB and 1 MiB).
	MaxKeyBytes, MaxValueBytes int
	// MaxBytes bounds the keys and values the DB holds, committed and
	// written under transactions not yet decided, all in memory (zero:
	// DefaultMaxBytes): a Put past it fails ResourceExhausted; deletes,
	// commits and aborts never do.
	//
	// A negative bound is refused (djinn.ErrInvalidArgument naming it).
	MaxBytes int64
	// MaxBytesPerNamespace bounds, the same way, the keys and values of
	// each namespace (see Space), so that one namespace cannot fill the
	// DB and starve the others (zero: MaxBytes, no bound of its own).
	MaxBytesPerNamespace int64
}

// DB is a transactional key/value store: the reference participant. See the
// package documentation for its semantics. It is safe for concurrent use.
type DB struct {
	p                *participant.Participant
	st               participant.Store
	maxKey, maxValue int
	maxBytes         int64
	maxPerNS         int64

	mu sync.Mutex
	// Guarded by mu.
	data     map[string][]byte            // committed values
	keys     *btree.BTreeG[string]        // data's keys in order, for listings
	locks    map[string]*lock             // by key
	prefixes map[string]map[*txn]struct{} // List under a transaction
	txs      map[participant.TxKey]*txn   // transactions with state here
	// held is the bytes of the keys and values in data and in the
	// transactions' changes, bounded by maxBytes; heldBy the same by
	// namespace (absent: none), each bounded by maxPerNS.
	held   int64
	heldBy map[string]int64
	// visited counts the keys of the index listings visited, for tests:
	// a page visits the keys it carries and a few more, not the store.
	visited int

	// Ops counts the operations asked of the DB, for metrics.
	Ops Ops
}

// Ops counts operations by kind, whatever their outcome.
type Ops struct {
	Gets, Puts, Deletes, Lists atomic.Uint64
}

// Len returns the number of committed keys.
func (d *DB) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.data)
}

// txn is what one transaction holds here (or a write without one, for
// the time it takes).
type txn struct {
	// anc are the transactions it is nested in, parent first: it sees
	// their changes, and their locks do not block it (TX.3).
	anc      []participant.TxKey
	changes  map[string]change   // its writes, seen only by itself (and nested ones)
	reads    map[string]struct{} // keys it read, shared-locked (nil until the first)
	prefixes map[string]struct{} // prefixes it listed, shared-locked (nil until the first)
}

// newTxn returns an empty txn; the read and list locks' maps are made
// when it first takes one: most transactions only write.
func newTxn() *txn {
	return &txn{changes: map[string]change{}}
}

// lock is a key's lock: one writer, or readers (a writer may read too).
type lock struct {
	writer  *txn
	readers map[*txn]struct{} // nil until the first reader
}

// Entry is a key and its value.
type Entry struct {
	Key   string
	Value []byte
}

// Open loads the committed data from the Store, restores the prepared
// transactions (holding their locks again) and starts the participant,
// which makes the roll decision for them with their managers (TX.2.8.1).
// Close stops it; the Store stays open.
func Open(cfg Config) (*DB, error) {
	if cfg.Participant.Store == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "key/value store: participant store missing")
	}
	if cfg.Participant.Resource != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "key/value store: the participant's resource is the store itself; leave it unset")
	}
	for _, b := range []struct {
		name   string
		v, def int64
	}{{"MaxKeyBytes", int64(cfg.MaxKeyBytes), DefaultMaxKeyBytes}, {"MaxValueBytes", int64(cfg.MaxValueBytes), DefaultMaxValueBytes}, {"MaxBytes", cfg.MaxBytes, DefaultMaxBytes}, {"MaxBytesPerNamespace", cfg.MaxBytesPerNamespace, cfg.MaxBytes}} {
		if b.v < 0 {
			return nil, djinn.Errorf(djinn.InvalidArgument, "key/value store config %s %d: negative; give a positive size, or zero for the default (%d)", b.name, b.v, b.def)
		}
	}
	d := &DB{
		st:       cfg.Participant.Store,
		maxKey:   cfg.MaxKeyBytes,
		maxValue: cfg.MaxValueBytes,
		maxBytes: cfg.MaxBytes,
		maxPerNS: cfg.MaxBytesPerNamespace,
		heldBy:   map[string]int64{},
		data:     map[string][]byte{},
		keys:     btree.NewOrderedG[string](indexDegree),
		locks:    map[string]*lock{},
		prefixes: map[string]map[*txn]struct{}{},
		txs:      map[participant.TxKey]*txn{},
	}
	if d.maxKey <= 0 {
		d.maxKey = DefaultMaxKeyBytes
	}
	if d.maxValue <= 0 {
		d.maxValue = DefaultMaxValueBytes
	}
	if d.maxBytes <= 0 {
		d.maxBytes = DefaultMaxBytes
	}
	if d.maxPerNS <= 0 {
		d.maxPerNS = d.maxBytes
	}
	if err := d.load(); err != nil {
		return nil, err
	}
	var err error
	pc := cfg.Participant
	pc.Resource = resource{d}
	if d.p, err = participant.New(pc); err != nil {
		return nil, err
	}
	return d, nil
}

// load reads the committed data from the Store: the default namespace's
// under dataPrefix, the others' under nsDataPrefix.
func (d *DB) load() error {
	err := d.st.Range(dataPrefix, func(key string, value []byte) error {
		d.applyLocked(nsKey("", strings.TrimPrefix(key, dataPrefix)), change{value: slices.Clone(value)})
		return nil
	})
	if err != nil {
		return err
	}
	return d.st.Range(nsDataPrefix, func(key string, value []byte) error {
		k := strings.TrimPrefix(key, nsDataPrefix)
		if ns, _, ok := splitKey(k); !ok || ns == "" {
			return djinn.Errorf(djinn.Internal, "key/value store: stored key %q names no namespace; the store is damaged (restore it from a copy)", key)
		}
		d.applyLocked(k, change{value: slices.Clone(value)})
		return nil
	})
}

// Participant returns the DB's participant, to serve with a
// participant.Server.
func (d *DB) Participant() *participant.Participant { return d.p }

// Close stops the participant. Operations under way finish first.
func (d *DB) Close() error { return d.p.Close() }

func (d *DB) checkKey(key string) error {
	switch {
	case key == "":
		return djinn.Errorf(djinn.InvalidArgument, "key: empty")
	case len(key) > d.maxKey:
		return djinn.Errorf(djinn.InvalidArgument, "key of %d bytes: longer than %d", len(key), d.maxKey)
	}
	return nil
}

// errLocked is a lock conflict. Its kind is Unavailable: the call did
// nothing, and may succeed later.
func errLocked(key string) error {
	return djinn.Errorf(djinn.Unavailable, "key %q: locked by another transaction; try again once it completes", userKey(key))
}

func errLockedPrefix(prefix, key string) error {
	return djinn.Errorf(djinn.Unavailable, "prefix %q: key %q locked by another transaction; try again once it completes", userKey(prefix), userKey(key))
}

// Put sets key to value: under tx, seen only by tx until it commits;
// with a nil tx, at once and durably.
func (d *DB) Put(ctx context.Context, tx *participant.Tx, key string, value []byte) error {
	return d.put(ctx, tx, "", key, value)
}

func (d *DB) put(ctx context.Context, tx *participant.Tx, ns, key string, value []byte) error {
	d.Ops.Puts.Add(1)
	if err := d.checkKey(key); err != nil {
		return err
	}
	if len(value) > d.maxValue {
		return djinn.Errorf(djinn.InvalidArgument, "value of %d bytes for key %q: longer than %d", len(value), key, d.maxValue)
	}
	c := change{value: slices.Clone(value)}
	if c.value == nil {
		c.value = []byte{}
	}
	if tx == nil {
		_, err := d.writeNow(ctx, nsKey(ns, key), c)
		return err
	}
	_, err := d.writeUnder(ctx, *tx, nsKey(ns, key), c)
	return err
}

// Delete removes key and reports whether it was there (as tx sees it):
// under tx, seen only by tx until it commits; with a nil tx, at once and
// durably.
func (d *DB) Delete(ctx context.Context, tx *participant.Tx, key string) (found bool, err error) {
	return d.delete(ctx, tx, "", key)
}

func (d *DB) delete(ctx context.Context, tx *participant.Tx, ns, key string) (found bool, err error) {
	d.Ops.Deletes.Add(1)
	if err := d.checkKey(key); err != nil {
		return false, err
	}
	if tx == nil {
		return d.writeNow(ctx, nsKey(ns, key), change{deleted: true})
	}
	return d.writeUnder(ctx, *tx, nsKey(ns, key), change{deleted: true})
}

// writeUnder records a change under tx, write-locking key.
func (d *DB) writeUnder(ctx context.Context, tx participant.Tx, key string, c change) (found bool, err error) {
	done, err := d.p.Join(ctx, tx)
	if err != nil {
		return false, err
	}
	defer done()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.txnLocked(tx)
	old, staged := t.changes[key]
	if err := d.roomLocked(key, c, old, staged); err != nil {
		return false, err
	}
	if err := d.lockWriteLocked(t, key); err != nil {
		return false, err
	}
	_, found = d.viewLocked(t, key)
	d.stageLocked(t, key, c)
	return found, nil
}

// writeNow applies a change at once, durably: it holds key's write lock
// while the Store writes.
func (d *DB) writeNow(ctx context.Context, key string, c change) (found bool, err error) {
	t := newTxn()
	d.mu.Lock()
	v, found := d.data[key]
	if err := d.roomLocked(key, c, change{value: v}, found); err != nil {
		d.mu.Unlock()
		return false, err
	}
	if err := d.lockWriteLocked(t, key); err != nil {
		d.mu.Unlock()
		return false, err
	}
	t.changes[key] = c       // its lock's: applied once written
	d.countLocked(key, c, 1) // held while it is written, so that writes at once cannot pass the limits together
	d.mu.Unlock()
	var b participant.Batch
	if c.deleted {
		b.Delete(storeKey(key))
	} else {
		b.Put(storeKey(key), c.value)
	}
	err = d.st.Apply(ctx, &b)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.countLocked(key, c, -1)
	if err == nil {
		d.applyLocked(key, c)
	}
	d.unlockLocked(t)
	return found, err
}

// Get returns key's value and whether it is there: under tx, as tx sees it
// (its own changes included), read-locking key against other transactions'
// writes; with a nil tx, the committed value.
func (d *DB) Get(ctx context.Context, tx *participant.Tx, key string) (value []byte, found bool, err error) {
	return d.get(ctx, tx, "", key)
}

func (d *DB) get(ctx context.Context, tx *participant.Tx, ns, key string) (value []byte, found bool, err error) {
	d.Ops.Gets.Add(1)
	if err := d.checkKey(key); err != nil {
		return nil, false, err
	}
	key = nsKey(ns, key)
	if tx == nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		v, ok := d.data[key]
		return slices.Clone(v), ok, nil
	}
	done, err := d.p.Join(ctx, *tx)
	if err != nil {
		return nil, false, err
	}
	defer done()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.txnLocked(*tx)
	if _, mine := t.changes[key]; !mine {
		if err := d.lockReadLocked(t, key); err != nil {
			return nil, false, err
		}
	}
	v, ok := d.viewLocked(t, key)
	return slices.Clone(v), ok, nil
}

// List returns the entries whose keys start with prefix, in key order:
// under tx, as tx sees them, locking the prefix against other
// transactions' writes; with a nil tx, the committed entries.
func (d *DB) List(ctx context.Context, tx *participant.Tx, prefix string) ([]Entry, error) {
	es, _, err := d.list(ctx, tx, "", prefix, page{})
	return es, err
}

// list returns the page pg of namespace ns's listing of prefix, and
// whether more entries follow it. Under tx each page read-locks the whole
// prefix, so that the pages are one view (the transaction's); a page
// refused leaves no lock the transaction did not hold before.
func (d *DB) list(ctx context.Context, tx *participant.Tx, ns, prefix string, pg page) (es []Entry, more bool, err error) {
	d.Ops.Lists.Add(1)
	if len(prefix) > d.maxKey {
		return nil, false, djinn.Errorf(djinn.InvalidArgument, "prefix of %d bytes: longer than %d", len(prefix), d.maxKey)
	}
	if err := d.checkAfter(prefix, pg.after); err != nil {
		return nil, false, err
	}
	userPrefix := prefix
	prefix = nsKey(ns, prefix)
	after := ""
	if pg.after != "" {
		after = nsKey(ns, pg.after)
	}
	var t *txn
	if tx != nil {
		done, err := d.p.Join(ctx, *tx)
		if err != nil {
			return nil, false, err
		}
		defer done()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if tx != nil {
		t = d.txnLocked(*tx)
		_, held := t.prefixes[prefix]
		if err := d.lockPrefixLocked(t, prefix); err != nil {
			return nil, false, err
		}
		if !held {
			defer func() {
				if err != nil {
					d.unlockPrefixLocked(t, prefix)
				}
			}()
		}
	}
	return pageFrom(d.listViewLocked(t, prefix, after), userPrefix, pg)
}

// indexDegree is the degree of the index of keys: its nodes hold 31 to
// 63 keys.
const indexDegree = 32

// listViewLocked returns the entries (by internal key) whose keys start
// with prefix and come after after, in key order, as t sees them (t nil:
// the committed ones). It walks the index from where they start, merging
// in the changes of t and of the transactions it is nested in, and stops
// when its caller does: a page costs the index's depth and its entries,
// plus the transactions' changes, not the store. The values are the DB's
// own: not to be changed. It is to be ranged over while d.mu is held.
func (d *DB) listViewLocked(t *txn, prefix, after string) iter.Seq2[string, []byte] {
	var over []string        // the changed keys in range, in order
	var cs map[string]change // their changes as t sees them
	if t != nil {
		over, cs = d.changesLocked(t, func(k string) bool { return strings.HasPrefix(k, prefix) && k > after })
	}
	return func(yield func(string, []byte) bool) {
		i := 0
		// before yields the changed keys before k (all of them when last)
		// that t sees, reporting whether to go on.
		before := func(k string, last bool) bool {
			for ; i < len(over) && (last || over[i] < k); i++ {
				if c := cs[over[i]]; !c.deleted && !yield(over[i], c.value) {
					return false
				}
			}
			return true
		}
		more := true
		// after starts with prefix when given, so the range starts at the
		// greater.
		d.keys.AscendGreaterOrEqual(max(prefix, after), func(k string) bool {
			d.visited++
			switch {
			case !strings.HasPrefix(k, prefix):
				return false
			case k == after:
				return true
			}
			if more = before(k, false); !more {
				return false
			}
			if c, changed := cs[k]; changed {
				i++ // over[i] is k: the keys before it are behind
				if c.deleted {
					return true
				}
				more = yield(k, c.value)
				return more
			}
			more = yield(k, d.data[k])
			return more
		})
		if more {
			before("", true)
		}
	}
}

// changesLocked returns the keys in (in order) that t or the transactions
// it is nested in changed, with the change t sees: its own, else its
// nearest ancestor's.
func (d *DB) changesLocked(t *txn, in func(string) bool) ([]string, map[string]change) {
	cs := map[string]change{}
	// The outermost ancestor's changes first, t's last.
	view := append(d.ancestorsLocked(t), t)
	slices.Reverse(view[:len(view)-1])
	for _, a := range view {
		for k, c := range a.changes {
			if in(k) {
				cs[k] = c
			}
		}
	}
	keys := make([]string, 0, len(cs))
	for k := range cs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, cs
}

// txnLocked returns what tx holds here, making it the first time (nested
// in the transactions the participant says). It is called only between
// Join and done, while tx is ACTIVE here.
func (d *DB) txnLocked(tx participant.Tx) *txn {
	t := d.txs[tx.Key()]
	if t == nil {
		t = newTxn()
		for _, a := range d.p.Ancestors(tx) {
			t.anc = append(t.anc, a.Key())
		}
		d.txs[tx.Key()] = t
	}
	return t
}

// ancestorsLocked returns the transactions t is nested in that hold
// something here, parent first.
func (d *DB) ancestorsLocked(t *txn) []*txn {
	var out []*txn
	for _, k := range t.anc {
		if a := d.txs[k]; a != nil {
			out = append(out, a)
		}
	}
	return out
}

// mineLocked reports whether a lock held by h does not block t: h is t or
// one of the transactions t is nested in.
func (d *DB) mineLocked(t, h *txn) bool {
	if h == t {
		return true
	}
	for _, k := range t.anc {
		if a := d.txs[k]; a != nil && a == h {
			return true
		}
	}
	return false
}

// viewLocked returns key's value as t sees it: its own change, else its
// nearest ancestor's, else the committed value.
func (d *DB) viewLocked(t *txn, key string) ([]byte, bool) {
	if c, ok := t.changes[key]; ok {
		return c.value, !c.deleted
	}
	for _, a := range d.ancestorsLocked(t) {
		if c, ok := a.changes[key]; ok {
			return c.value, !c.deleted
		}
	}
	v, ok := d.data[key]
	return v, ok
}

// applyLocked makes change c of key committed, in data and its index:
// every write of the committed data comes here (writes at once, commits,
// and the load at Open).
func (d *DB) applyLocked(key string, c change) {
	old, ok := d.data[key]
	if ok {
		d.countLocked(key, change{value: old}, -1)
	}
	switch {
	case c.deleted && ok:
		delete(d.data, key)
		d.keys.Delete(key)
	case c.deleted:
	default:
		if !ok {
			d.keys.ReplaceOrInsert(key) // the same string as data's key: no copy
		}
		d.data[key] = c.value
		d.countLocked(key, c, 1)
	}
}

// size is what a change of an internal key holds in memory, as held
// counts it: its key as its namespace knows it, and its value.
func size(key string, c change) int64 { return int64(len(userKey(key)) + len(c.value)) }

// countLocked adds (sign 1) or removes (sign -1) change c of key from what
// the DB and key's namespace hold.
func (d *DB) countLocked(key string, c change, sign int64) {
	n := sign * size(key, c)
	d.held += n
	ns := nsOf(key)
	if d.heldBy[ns] += n; d.heldBy[ns] == 0 {
		delete(d.heldBy, ns)
	}
}

// stageLocked records change c of key under t, in place of t's own
// change of it.
func (d *DB) stageLocked(t *txn, key string, c change) {
	if old, ok := t.changes[key]; ok {
		d.countLocked(key, old, -1)
	}
	t.changes[key] = c
	d.countLocked(key, c, 1)
}

// dropLocked forgets t's changes (applied, merged or aborted).
func (d *DB) dropLocked(t *txn) {
	for k, c := range t.changes {
		d.countLocked(k, c, -1)
	}
}

// roomLocked refuses change c of key when it would make the DB hold more
// than maxBytes, given what it replaces: old, when replaced is set (the
// committed value for a write without a transaction, the transaction's
// own change under one). A delete always has room.
func (d *DB) roomLocked(key string, c change, old change, replaced bool) error {
	if c.deleted {
		return nil
	}
	grow := size(key, c)
	if replaced {
		grow -= size(key, old)
	}
	if ns := nsOf(key); d.heldBy[ns]+grow > d.maxPerNS && grow > 0 {
		return djinn.Errorf(djinn.ResourceExhausted, "key %q with a value of %d bytes: your keys and values would take %d bytes of the key/value store, over each caller's limit of %d; delete some of yours first, or ask its operator to raise the limit ([kv] max-bytes-per-principal)",
			userKey(key), len(c.value), d.heldBy[ns]+grow, d.maxPerNS)
	}
	if after := d.held + grow; after > d.maxBytes && grow > 0 {
		return djinn.Errorf(djinn.ResourceExhausted, "key %q with a value of %d bytes: the key/value store would hold %d bytes of keys and values, over its limit of %d; delete some first, or raise its limit ([kv] max-bytes)",
			userKey(key), len(c.value), after, d.maxBytes)
	}
	return nil
}

// lockWriteLocked write-locks key for t: no other transaction (but those
// t is nested in) may hold it, have read it, or have listed a prefix of
// it. A nested transaction takes the write lock over from its ancestor
// until it merges into its parent or aborts.
func (d *DB) lockWriteLocked(t *txn, key string) error {
	l := d.locks[key]
	if l != nil {
		if l.writer != nil && !d.mineLocked(t, l.writer) {
			return errLocked(key)
		}
		for r := range l.readers {
			if !d.mineLocked(t, r) {
				return errLocked(key)
			}
		}
	}
	for p, holders := range d.prefixes {
		if !strings.HasPrefix(key, p) {
			continue
		}
		for h := range holders {
			if !d.mineLocked(t, h) {
				return errLockedPrefix(p, key)
			}
		}
	}
	if l == nil {
		l = &lock{}
		d.locks[key] = l
	}
	l.writer = t
	return nil
}

// lockReadLocked read-locks key for t: no other transaction (but those t
// is nested in) may hold its write lock.
func (d *DB) lockReadLocked(t *txn, key string) error {
	l := d.locks[key]
	if l != nil && l.writer != nil && !d.mineLocked(t, l.writer) {
		return errLocked(key)
	}
	if l == nil {
		l = &lock{}
		d.locks[key] = l
	}
	if l.readers == nil {
		l.readers = map[*txn]struct{}{}
	}
	l.readers[t] = struct{}{}
	if t.reads == nil {
		t.reads = map[string]struct{}{}
	}
	t.reads[key] = struct{}{}
	return nil
}

// lockPrefixLocked read-locks every key starting with prefix, present or
// not, for t: no other transaction (but those t is nested in) may hold the
// write lock of such a key.
func (d *DB) lockPrefixLocked(t *txn, prefix string) error {
	if _, ok := t.prefixes[prefix]; ok {
		return nil
	}
	for k, l := range d.locks {
		if l.writer != nil && !d.mineLocked(t, l.writer) && strings.HasPrefix(k, prefix) {
			return errLockedPrefix(prefix, k)
		}
	}
	h := d.prefixes[prefix]
	if h == nil {
		h = map[*txn]struct{}{}
		d.prefixes[prefix] = h
	}
	h[t] = struct{}{}
	if t.prefixes == nil {
		t.prefixes = map[string]struct{}{}
	}
	t.prefixes[prefix] = struct{}{}
	return nil
}

// unlockReadsLocked releases t's read and prefix locks.
func (d *DB) unlockReadsLocked(t *txn) {
	for k := range t.reads {
		if l := d.locks[k]; l != nil {
			delete(l.readers, t)
			d.dropIfFreeLocked(k, l)
		}
	}
	clear(t.reads)
	for p := range t.prefixes {
		d.unlockPrefixLocked(t, p)
	}
}

// unlockPrefixLocked releases t's read lock on prefix.
func (d *DB) unlockPrefixLocked(t *txn, prefix string) {
	if h := d.prefixes[prefix]; h != nil {
		delete(h, t)
		if len(h) == 0 {
			delete(d.prefixes, prefix)
		}
	}
	delete(t.prefixes, prefix)
}

// unlockLocked releases every lock t holds. A write lock t took over from
// an ancestor that changed the key too goes back to it.
func (d *DB) unlockLocked(t *txn) {
	d.unlockReadsLocked(t)
	anc := d.ancestorsLocked(t)
	for k := range t.changes {
		if l := d.locks[k]; l != nil && l.writer == t {
			l.writer = nil
			for _, a := range anc {
				if _, ok := a.changes[k]; ok {
					l.writer = a
					break
				}
			}
			d.dropIfFreeLocked(k, l)
		}
	}
}

// dropIfFreeLocked forgets a lock nobody holds.
func (d *DB) dropIfFreeLocked(key string, l *lock) {
	if l.writer == nil && len(l.readers) == 0 {
		delete(d.locks, key)
	}
}

// String describes the DB for logs.
func (d *DB) String() string { return fmt.Sprintf("key/value store %s", d.p.Ref()) }
