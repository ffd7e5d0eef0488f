package lookup

import (
	"fmt"
	"math"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/service"
)

// item is a registration: the item in canonical form, and the id of the
// lease that keeps it. Its record is replaced, never changed in place.
type item struct {
	service.Record
	lease djinn.ID
}

// unlimited is what Import checks snapshots against: structure, not size.
var unlimited = service.Limits{
	MaxEntries: math.MaxInt, MaxFields: math.MaxInt, MaxAttributeBytes: math.MaxInt,
	MaxRefBytes: math.MaxInt, MaxTypes: math.MaxInt, MaxNameLen: math.MaxInt,
}

// checkItem checks a registration's item: its id as checkServiceID does,
// the rest by the vocabulary's rules.
func checkItem(lim service.Limits, it service.Item, self djinn.ID) (*item, error) {
	if err := checkServiceID(it.ID, self); err != nil {
		return nil, err
	}
	rec, err := lim.Record(it)
	if err != nil {
		return nil, err
	}
	return &item{Record: rec}, nil
}

// checkServiceID refuses the zero id and the registrar's own.
func checkServiceID(id, self djinn.ID) error {
	switch id {
	case djinn.ID{}:
		return djinn.Errorf(djinn.InvalidArgument, "service id %s: zero (the caller assigns ids)", id)
	case self:
		return djinn.Errorf(djinn.InvalidArgument, "service id %s: the lookup service's own id is reserved", id)
	}
	return nil
}

// encodeItems returns the wire form of each of its, all in one buffer.
func encodeItems(its []*item) [][]byte {
	size := 0
	for _, it := range its {
		size += it.WireSize()
	}
	return encodeItemsIn(its, size)
}

// encodeItemsIn is encodeItems given the items' wire size, the sum of
// their WireSize.
func encodeItemsIn(its []*item, size int) [][]byte {
	buf := make([]byte, 0, size)
	out := make([][]byte, len(its))
	for i, it := range its {
		start := len(buf)
		buf = it.AppendWire(buf)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out
}

func overLimit(what string, n int, limit string, max int) error {
	return djinn.Errorf(djinn.ResourceExhausted, "%s %d: over the limit %s of %d", what, n, limit, max)
}

// clip shortens a long string for an error message.
func clip(s string) string {
	const n = 48
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// wrap puts where the bad value is in front of err's message, keeping its
// kind.
func wrap(err error, format string, args ...any) error {
	return &djinn.Error{Kind: djinn.KindOf(err), Message: fmt.Sprintf(format, args...) + " " + err.Error()}
}
