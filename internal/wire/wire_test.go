package wire

import (
	"bytes"
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
