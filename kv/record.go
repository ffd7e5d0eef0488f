package kv

import (
	"encoding/binary"
	"slices"

	"github.com/djinn-go/djinn"
)

// change is a transaction's pending change to one key.
type change struct {
	value   []byte
	deleted bool
}

// The kinds of change in a prepared record. A change of a key in a
// namespace other than the default one has kindNamespaced added, and its
// namespace before its key; records written before namespaces hold the
// default namespace's changes only.
const (
	kindPut        = 0
	kindDelete     = 1
	kindNamespaced = 2
)

// encodeChanges returns a prepared record: the changes in key order.
func encodeChanges(cs map[string]change) []byte {
	keys := make([]string, 0, len(cs))
	size := binary.MaxVarintLen64
	for k, c := range cs {
		keys = append(keys, k)
		size += 1 + 2*binary.MaxVarintLen64 + len(k) + len(c.value)
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		c := cs[k]
		kind := byte(kindPut)
		if c.deleted {
			kind = kindDelete
		}
		ns, key, _ := splitKey(k)
		if ns != "" {
			kind += kindNamespaced
		}
		b = append(b, kind)
		if ns != "" {
			b = binary.AppendUvarint(b, uint64(len(ns)))
			b = append(b, ns...)
		}
		b = binary.AppendUvarint(b, uint64(len(key)))
		b = append(b, key...)
		if !c.deleted {
			b = binary.AppendUvarint(b, uint64(len(c.value)))
			b = append(b, c.value...)
		}
	}
	return b
}

// decodeChanges reads a prepared record. Values are copied.
func decodeChanges(b []byte) (map[string]change, error) {
	bad := func(what string) error { return djinn.Errorf(djinn.Internal, "key/value prepared record: %s", what) }
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, bad("bad count")
	}
	b = b[k:]
	field := func() ([]byte, bool) {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, false
		}
		v := b[k : k+int(l)]
		b = b[k+int(l):]
		return v, true
	}
	cs := make(map[string]change, n)
	for range n {
		if len(b) == 0 {
			return nil, bad("cut short")
		}
		kind := b[0]
		b = b[1:]
		var ns []byte
		ok := kind <= kindDelete+kindNamespaced
		if ok && kind >= kindNamespaced {
			ns, ok = field()
			ok = ok && len(ns) > 0
		}
		key, ok2 := field()
		if !ok || !ok2 {
			return nil, bad("bad change")
		}
		c := change{deleted: kind&kindDelete != 0}
		if !c.deleted {
			v, ok := field()
			if !ok {
				return nil, bad("bad value")
			}
			c.value = slices.Clone(v)
			if c.value == nil {
				c.value = []byte{}
			}
		}
		cs[nsKey(string(ns), string(key))] = c
	}
	if len(b) != 0 {
		return nil, bad("trailing bytes")
	}
	return cs, nil
}
