package lock

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/djinn-go/djinn"
)

// docDecoder decodes a snapshot's document as its bytes are pushed to it:
// one JSON object whose fields are those of snapshot, in any order,
// matched as json.Unmarshal matches them (case aside); unknown fields are
// skipped. It walks the document's outer objects and lists itself and
// decodes each field value and list element with encoding/json once its
// bytes are all there, then drops them: it holds the bytes of one value
// and one record at most.
type docDecoder struct {
	st    *staged
	buf   []byte // bytes pushed, buf[off:] not yet decoded
	off   int
	need  int // try no value again before buf[off:] is this long: it did not fit in less
	final bool
	at    docState
	ret   docState // where a list or a value returns to
	list  listKind
	field string // the field whose value is next
	first bool   // no field or element yet in the object or list
	comma bool   // a comma was just read
	seen  []string
}

type docState uint8

const (
	atBegin     docState = iota // before the document's {
	atField                     // before a field of the document, or its }
	atTableOpen                 // before Table's {
	atTable                     // before a field of Table, or its }
	atValue                     // before a field's value, decoded whole
	atList                      // before a list's [ (or null)
	atElem                      // before an element of a list, or its ]
	atEnd                       // after the document
)

type listKind uint8

const (
	tableSets listKind = iota
	setNames
	holderNames
	votes
)

func newDocDecoder() *docDecoder {
	return &docDecoder{st: &staged{im: newImporter(), setInfo: []setInfo{{}}, far: map[uint64]setInfo{},
		owners: map[djinn.ID]uint64{}, txns: map[TxnKey]uint64{}, holders: map[uint64]holderName{}, waiting: map[uint64]string{}}}
}

// push decodes what b completes of the document; last says b is its end.
func (d *docDecoder) push(b []byte, last bool) error {
	d.buf, d.final = append(d.buf, b...), last
	for {
		more, err := d.step()
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	if d.off > 0 && d.off >= len(d.buf)/2 {
		n := copy(d.buf, d.buf[d.off:])
		d.buf, d.off = d.buf[:n], 0
	}
	if !last {
		return nil
	}
	d.skipSpace()
	switch {
	case d.at != atEnd:
		return snapErr("the document ends early")
	case d.off != len(d.buf):
		return snapErr("data after the document")
	}
	return nil
}

func (d *docDecoder) skipSpace() {
	for d.off < len(d.buf) {
		switch d.buf[d.off] {
		case ' ', '\t', '\n', '\r':
			d.off++
		default:
			return
		}
	}
}

// step decodes the next piece of the document, if its bytes are there,
// and reports whether it did.
func (d *docDecoder) step() (bool, error) {
	d.skipSpace()
	if d.off == len(d.buf) || d.at == atEnd {
		return false, nil
	}
	c := d.buf[d.off]
	switch d.at {
	case atBegin, atTableOpen:
		if c != '{' {
			return false, snapErr("%q where { was expected", c)
		}
		d.off++
		if d.at == atBegin {
			d.at = atField
		} else {
			d.at = atTable
		}
		d.first, d.comma = true, false
		return true, nil
	case atField, atTable:
		return d.member(c)
	case atValue:
		return d.value()
	case atList:
		return d.openList(c)
	}
	return d.elem(c)
}

// punct reads the } or ] that ends an object or list, or the comma
// between its members; it reports whether it read one.
func (d *docDecoder) punct(c, end byte) (read, ended bool, err error) {
	if c == end && !d.comma {
		d.off++
		return true, true, nil
	}
	if d.first || d.comma {
		return false, false, nil
	}
	if c != ',' {
		return false, false, snapErr("%q where , or %q was expected", c, end)
	}
	d.off++
	d.comma = true
	return true, false, nil
}

// member reads a field's name and its colon, or the object's end.
func (d *docDecoder) member(c byte) (bool, error) {
	read, ended, err := d.punct(c, '}')
	if ended {
		if d.at == atField {
			d.at = atEnd
		} else {
			d.at, d.first, d.comma = atField, false, false
		}
	}
	if read || err != nil {
		return read, err
	}
	var name string
	n, ok, err := d.peek(&name)
	if !ok || err != nil {
		return false, err
	}
	i := d.off + n
	for i < len(d.buf) && strings.IndexByte(" \t\n\r", d.buf[i]) >= 0 {
		i++
	}
	if i == len(d.buf) {
		return false, d.ends()
	}
	if d.buf[i] != ':' {
		return false, snapErr("%q where : was expected after %q", d.buf[i], name)
	}
	d.off, d.need = i+1, 0
	return true, d.dispatch(name)
}

// dispatch sets what reads the value of field name.
func (d *docDecoder) dispatch(name string) error {
	d.ret, d.field, d.at = d.at, strings.ToLower(name), atValue
	if d.ret == atTable {
		if d.field == "sets" {
			d.at, d.list = atList, tableSets
		}
		return nil
	}
	for _, s := range d.seen {
		if strings.EqualFold(s, name) {
			return snapErr("field %q appears twice", name)
		}
	}
	d.seen = append(d.seen, name)
	switch d.field {
	case "table":
		d.at = atTableOpen
	case "sets":
		d.at, d.list = atList, setNames
	case "holders":
		d.at, d.list = atList, holderNames
	case "aborted":
		d.at, d.list = atList, votes
	}
	return nil
}

// value decodes a field's whole value.
func (d *docDecoder) value() (bool, error) {
	var skip json.RawMessage
	var v any = &skip
	if d.ret == atField {
		switch st := d.st; d.field {
		case "nextset":
			v = &st.nextSet
		case "freesets":
			v = &st.freeSets
		case "nextid":
			v = &st.nextID
		case "recent":
			v = &st.recent
		case "waiting":
			v = &st.waiting
		}
	}
	ok, err := d.take(v)
	if ok {
		d.at, d.first, d.comma = d.ret, false, false
	}
	return ok, err
}

// openList reads a list's [, or null for none.
func (d *docDecoder) openList(c byte) (bool, error) {
	if c == '[' {
		d.off++
		d.at, d.first, d.comma = atElem, true, false
		return true, nil
	}
	var v json.RawMessage
	ok, err := d.take(&v)
	if ok && string(v) != "null" {
		return false, snapErr("%.20s where a list was expected", v)
	}
	if ok {
		d.at, d.first, d.comma = d.ret, false, false
	}
	return ok, err
}

// elem decodes a list's next element, or reads its ] or a comma.
func (d *docDecoder) elem(c byte) (bool, error) {
	read, ended, err := d.punct(c, ']')
	if ended {
		d.at, d.first, d.comma = d.ret, false, false
	}
	if read || err != nil {
		return read, err
	}
	switch d.list {
	case tableSets:
		return element(d, d.st.im.add)
	case setNames:
		return element(d, d.st.addSet)
	case votes:
		return element(d, d.st.votes.add)
	}
	return element(d, d.st.addHolder)
}

func element[T any](d *docDecoder, add func(T) error) (bool, error) {
	var v T
	ok, err := d.take(&v)
	if !ok || err != nil {
		return false, err
	}
	d.first, d.comma = false, false
	return true, add(v)
}

// take decodes the value at off into v and goes past it, if its bytes
// are all there.
func (d *docDecoder) take(v any) (bool, error) {
	n, ok, err := d.peek(v)
	if ok {
		d.off, d.need = d.off+n, 0
	}
	return ok, err
}

// peek decodes the value at off into v, if its bytes are all there, and
// returns its length. A value is whole when a byte follows it (a number
// may go on otherwise) or the document ends.
func (d *docDecoder) peek(v any) (int, bool, error) {
	rest := d.buf[d.off:]
	if len(rest) < d.need && !d.final {
		return 0, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	err := dec.Decode(v)
	n := int(dec.InputOffset())
	switch {
	case err == nil && (n < len(rest) || d.final):
		return n, true, nil
	case err == nil || err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		d.need = 2 * len(rest) // retried once twice as many bytes are there
		return 0, false, d.ends()
	}
	return 0, false, snapErr("%v", err)
}

// ends is the error of a value cut short by the document's end.
func (d *docDecoder) ends() error {
	if d.final {
		return snapErr("the document ends early")
	}
	return nil
}
