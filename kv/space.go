package kv

import (
	"context"
	"strconv"
	"strings"

	"github.com/djinn-go/djinn/participant"
)

// nsDataPrefix starts the Store keys of committed data in a namespace
// other than the default one (whose keys stay under dataPrefix, as they
// were before namespaces): nsDataPrefix, then the internal key.
const nsDataPrefix = "kvns/"

// Space is one namespace of a DB: its own keys, which no other namespace
// sees, reads, overwrites, deletes or lists, and its own bound on the bytes
// it holds (Config.MaxBytesPerNamespace). Its methods behave as the DB's
// (which are the default namespace's, ""); the same key name in two
// namespaces is two keys, so writes to it never conflict. Errors and
// listings name the namespace's keys as given, never the namespace.
//
// A transaction may span namespaces: whoever commits it (its manager,
// through the participant) commits every namespace's changes.
type Space struct {
	d  *DB
	ns string
}

// Space returns namespace ns of the DB. A server gives each principal its
// own (see WithNamespace); "" is the default namespace, the DB's own.
func (d *DB) Space(ns string) *Space { return &Space{d: d, ns: ns} }

// Namespace returns the namespace's name.
func (s *Space) Namespace() string { return s.ns }

// Put sets key to value in the namespace, as DB.Put does.
func (s *Space) Put(ctx context.Context, tx *participant.Tx, key string, value []byte) error {
	return s.d.put(ctx, tx, s.ns, key, value)
}

// Get returns key's value in the namespace, as DB.Get does.
func (s *Space) Get(ctx context.Context, tx *participant.Tx, key string) ([]byte, bool, error) {
	return s.d.get(ctx, tx, s.ns, key)
}

// Delete removes key from the namespace, as DB.Delete does.
func (s *Space) Delete(ctx context.Context, tx *participant.Tx, key string) (bool, error) {
	return s.d.delete(ctx, tx, s.ns, key)
}

// List returns the namespace's entries whose keys start with prefix, as
// DB.List does.
func (s *Space) List(ctx context.Context, tx *participant.Tx, prefix string) ([]Entry, error) {
	es, _, err := s.d.list(ctx, tx, s.ns, prefix, page{})
	return es, err
}

// nsKey returns the DB's internal key of key in namespace ns: the
// namespace's length in decimal, a colon, the namespace, then the key.
// The form is prefix-free, so no namespace's keys (or prefixes) start
// with another's.
func nsKey(ns, key string) string { return strconv.Itoa(len(ns)) + ":" + ns + key }

// splitKey undoes nsKey; ok is false for a string nsKey did not make.
func splitKey(k string) (ns, key string, ok bool) {
	l, rest, found := strings.Cut(k, ":")
	n, err := strconv.Atoi(l)
	if !found || err != nil || n < 0 || n > len(rest) || strconv.Itoa(n) != l {
		return "", "", false
	}
	return rest[:n], rest[n:], true
}

// userKey returns the key an internal key names, as its namespace knows it.
func userKey(k string) string {
	_, key, _ := splitKey(k)
	return key
}

// nsOf returns the namespace of an internal key.
func nsOf(k string) string {
	ns, _, _ := splitKey(k)
	return ns
}

// storeKey returns where an internal key's committed value lives in the
// Store: the default namespace's keys under dataPrefix as given (as
// before namespaces), the others' under nsDataPrefix.
func storeKey(k string) string {
	ns, key, _ := splitKey(k)
	if ns == "" {
		return dataPrefix + key
	}
	return nsDataPrefix + k
}
