package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
)

func TestChunks(t *testing.T) {
	for _, n := range []int{0, 1, RecordSize, RecordSize + 1, 2*RecordSize + 5} {
		b := bytes.Repeat([]byte{7}, n)
		cs := Chunks(b)
		if len(cs) == 0 || !bytes.Equal(bytes.Join(cs, nil), b) {
			t.Fatalf("%d bytes: %d chunks that do not join back", n, len(cs))
		}
		for _, c := range cs {
			if len(c) > RecordSize {
				t.Fatalf("%d bytes: a chunk of %d", n, len(c))
			}
		}
	}
}

// TestRecords: the pieces in order, only the final one marked last.
func TestRecords(t *testing.T) {
	type rec struct {
		piece []byte
		last  bool
	}
	b := bytes.Repeat([]byte{7}, 2*RecordSize+5)
	rs := Records(b, func(c []byte, last bool) rec { return rec{c, last} })
	if len(rs) != 3 {
		t.Fatalf("%d records, want 3", len(rs))
	}
	var joined []byte
	for i, r := range rs {
		if r.last != (i == len(rs)-1) {
			t.Errorf("record %d: last %v", i, r.last)
		}
		joined = append(joined, r.piece...)
	}
	if !bytes.Equal(joined, b) {
		t.Error("the records do not join back")
	}
	if one := Records(nil, func(c []byte, last bool) rec { return rec{c, last} }); len(one) != 1 || !one[0].last {
		t.Errorf("empty state: %+v, want one last record", one)
	}
}

func TestRefsAndNanos(t *testing.T) {
	r := djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.NewID(), Object: djinn.NewID()}
	if got, err := RefTo("x", Ref(r)); err != nil || got != r {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if _, err := RefFrom("x", nil); err == nil {
		t.Fatal("nil reference accepted")
	}
	bad := Ref(r)
	bad.Endpoint = "nowhere"
	if _, err := RefTo("x", bad); err == nil {
		t.Fatal("an endpoint without a port accepted")
	}
	if Nanos(djinn.EndOfTime) != int64(djinn.Forever) || Nanos(time.Unix(0, 5)) != 5 {
		t.Fatal("nanos")
	}
}

func TestTxnSecret(t *testing.T) {
	s := djinn.NewID()
	if got, err := TxnSecret(TxnSecretBytes(s)); err != nil || got != s {
		t.Errorf("TxnSecret(TxnSecretBytes(s)) = %v, %v; want s", got, err)
	}
	if got, err := TxnSecret(nil); err != nil || !got.IsZero() || TxnSecretBytes(got) != nil {
		t.Errorf("no secret: %v, %v; want the zero secret, sent as none", got, err)
	}
	if _, err := TxnSecret(make([]byte, 15)); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "15 bytes") {
		t.Errorf("15 bytes: %v; want InvalidArgument naming the length", err)
	}
}
