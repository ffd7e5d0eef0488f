package participant

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"slices"
	"strings"
	"sync"

	"github.com/djinn-go/djinn"
)

// Store is a participant's durable state: a crash count and a map of byte
// records changed in atomic batches. The participant keeps its identity and
// its prepared records there (under ReservedPrefix); the application may keep
// its own data there too, under any other prefix, so that rolling a
// transaction forward and dropping its prepared record is one atomic write
// (see Resource.Commit).
//
// Implementations must be safe for concurrent use. The caller that opened a
// Store closes it, after the participants using it are closed.
type Store interface {
	// CrashCount is the version of the storage that holds the state of the
	// participant's transactions (TX.2.3). The participant library holds
	// ACTIVE transactions in memory and loses them whenever it stops, so a
	// store must return a count different from that of every earlier opening
	// of the same storage (and of any storage that may have been used under
	// the same participant identity): a manager that sees a participant
	// join again with another count aborts the transaction instead of
	// committing it without the changes the participant forgot.
	CrashCount() int64
	// Range calls fn with each record whose key starts with prefix, in key
	// order, until fn returns an error, which Range returns. value belongs
	// to the store: fn must not modify or keep it. fn must not call the
	// store.
	Range(prefix string, fn func(key string, value []byte) error) error
	// Apply applies the batch: when it returns nil every change is on
	// storage at least as durable as the participant's state, and after a
	// crash either all the batch's changes are found or none. A failed Apply
	// may leave the store unusable (the participant must then restart).
	// Apply does not keep b.
	Apply(ctx context.Context, b *Batch) error
}

// ReservedPrefix starts the keys the participant library keeps in a Store.
// Applications must not write keys that start with it.
const ReservedPrefix = "participant/"

// Op is one change of a batch: a Put of Value at Key, or a Delete of Key.
type Op struct {
	Key    string
	Value  []byte
	Delete bool
}

// Batch is a list of changes applied atomically, in order.
type Batch struct {
	ops []Op
}

// Put adds setting key to value (Apply copies value).
func (b *Batch) Put(key string, value []byte) { b.ops = append(b.ops, Op{Key: key, Value: value}) }

// Delete adds removing key (nothing if it is absent).
func (b *Batch) Delete(key string) { b.ops = append(b.ops, Op{Key: key, Delete: true}) }

// Ops returns the changes, in order. The slice belongs to b.
func (b *Batch) Ops() []Op { return b.ops }

// Len returns the number of changes.
func (b *Batch) Len() int {
	if b == nil {
		return 0
	}
	return len(b.ops)
}

// checkApp refuses application changes to the library's keys.
func (b *Batch) checkApp() error {
	for _, op := range b.Ops() {
		if strings.HasPrefix(op.Key, ReservedPrefix) {
			return djinn.Errorf(djinn.InvalidArgument, "store key %q: the prefix %q is the participant library's", op.Key, ReservedPrefix)
		}
	}
	return nil
}

// MemStore is a Store in memory, for tests and for participants whose
// state need not survive the process (TX.2.9: a volatile participant). Its
// crash count is random, so it differs on every start (TX.2.3).
type MemStore struct {
	crash int64

	mu   sync.Mutex
	recs map[string][]byte // guarded by mu
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty store with a fresh crash count.
func NewMemStore() *MemStore {
	return &MemStore{crash: randomCount(), recs: map[string][]byte{}}
}

// randomCount returns a random non-negative crash count.
func randomCount() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]) >> 2)
}

// CrashCount implements Store.
func (m *MemStore) CrashCount() int64 { return m.crash }

// Range implements Store.
func (m *MemStore) Range(prefix string, fn func(key string, value []byte) error) error {
	m.mu.Lock()
	keys := make([]string, 0, len(m.recs))
	for k := range m.recs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	vals := make([][]byte, len(keys))
	slices.Sort(keys)
	for i, k := range keys {
		vals[i] = m.recs[k]
	}
	m.mu.Unlock()
	for i, k := range keys {
		if err := fn(k, vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// Apply implements Store.
func (m *MemStore) Apply(ctx context.Context, b *Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, op := range b.Ops() {
		if op.Delete {
			delete(m.recs, op.Key)
		} else {
			m.recs[op.Key] = slices.Clone(op.Value)
		}
	}
	return nil
}

// Reopen returns the store as a restarted participant would find it if
// memory survived the restart: the same records, and a new crash count.
// The two stores share nothing afterwards.
func (m *MemStore) Reopen() *MemStore {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := NewMemStore()
	for k, v := range m.recs {
		n.recs[k] = v
	}
	return n
}
