package lock

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// A snapshot is encoded as it is written: the document json.Marshal would
// make of it, byte for byte, cut into records as wire.Records would cut
// that document — without the whole document ever in memory. The
// top-level fields are written here in the struct's order and under its
// names (TestEncodeFields fails when a field is added); each element of
// the long slices is marshalled on its own.

// encode writes snap to emit as records of at most size bytes, the last
// one with Last.
func (snap snapshot) encode(size int, emit func(*statepb.LockRecord) error) error {
	e := &encoder{w: recordWriter{size: size, emit: emit}}
	e.enc = json.NewEncoder(&e.buf)
	e.raw(`{"Table":`)
	if snap.Table.Sets == nil {
		e.raw(`{"Sets":null}`)
	} else {
		e.raw(`{"Sets":`)
		list(e, snap.Table.Sets)
		e.raw(`}`)
	}
	e.raw(`,"Sets":`)
	list(e, snap.Sets)
	e.raw(`,"NextSet":`)
	e.number(snap.NextSet)
	if len(snap.FreeSets) > 0 { // omitempty
		e.raw(`,"FreeSets":`)
		e.uints(snap.FreeSets)
	}
	e.raw(`,"Holders":`)
	list(e, snap.Holders)
	e.raw(`,"NextID":`)
	e.number(snap.NextID)
	e.raw(`,"Recent":`)
	e.uints(snap.Recent)
	if len(snap.Waiting) > 0 { // omitempty; as many as waiting requests
		e.raw(`,"Waiting":`)
		e.value(snap.Waiting)
	}
	if len(snap.Aborted) > 0 { // omitempty; bounded by maxAbortedVotes
		e.raw(`,"Aborted":`)
		list(e, snap.Aborted)
	}
	e.raw(`}`)
	return e.w.finish()
}

// encoder writes JSON values to a recordWriter.
type encoder struct {
	w       recordWriter
	buf     bytes.Buffer
	enc     *json.Encoder // into buf; json.Marshal's output and a newline
	scratch []byte
}

func (e *encoder) raw(s string) { e.w.write([]byte(s)) }

// value writes v as json.Marshal encodes it.
func (e *encoder) value(v any) {
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		e.w.fail(djinn.Errorf(djinn.Internal, "lock state snapshot: %v", err))
		return
	}
	b := e.buf.Bytes()
	e.w.write(b[:len(b)-1])
}

func (e *encoder) number(v uint64) {
	e.scratch = strconv.AppendUint(e.scratch[:0], v, 10)
	e.w.write(e.scratch)
}

// uints writes a []uint64 as json.Marshal does: null when nil.
func (e *encoder) uints(vs []uint64) {
	if vs == nil {
		e.raw("null")
		return
	}
	e.raw("[")
	for i, v := range vs {
		if i > 0 {
			e.raw(",")
		}
		e.number(v)
	}
	e.raw("]")
}

// list writes a slice as json.Marshal does, an element at a time.
func list[T any](e *encoder, vs []T) {
	if vs == nil {
		e.raw("null")
		return
	}
	e.raw("[")
	for i := range vs {
		if i > 0 {
			e.raw(",")
		}
		e.value(&vs[i])
	}
	e.raw("]")
}

// recordWriter cuts the bytes written to it into records of size bytes,
// as wire.Chunks cuts a whole document: a full record is held back until
// more bytes come, so that the last record is full when the document is
// an exact multiple of size, and never empty unless the document is. The
// first error (emit's, or the encoder's) stops it and finish returns it.
type recordWriter struct {
	size int
	cur  []byte
	emit func(*statepb.LockRecord) error
	err  error
}

func (w *recordWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *recordWriter) write(p []byte) {
	for len(p) > 0 && w.err == nil {
		if len(w.cur) == w.size {
			w.err = w.emit(&statepb.LockRecord{Table: w.cur})
			w.cur = make([]byte, 0, w.size) // more follows: a record's worth
			continue
		}
		k := min(len(p), w.size-len(w.cur))
		if cap(w.cur)-len(w.cur) < k {
			// The first record grows by doubling (a small document
			// stays small), never past a record.
			c := make([]byte, len(w.cur), min(w.size, max(2*cap(w.cur), len(w.cur)+k, 4096)))
			copy(c, w.cur)
			w.cur = c
		}
		w.cur = append(w.cur, p[:k]...)
		p = p[k:]
	}
}

// finish emits the last record.
func (w *recordWriter) finish() error {
	if w.err != nil {
		return w.err
	}
	if w.cur == nil {
		w.cur = []byte{}
	}
	return w.emit(&statepb.LockRecord{Table: w.cur, Last: true})
}
