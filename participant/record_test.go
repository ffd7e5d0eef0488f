package participant

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/djinn-go/djinn"
)

func FuzzDecodeRecord(f *testing.F) {
	tx := Tx{Manager: djinn.Ref{Endpoint: "127.0.0.1:4160", Service: djinn.NewID(), Object: djinn.NewID()}, ID: 42}
	f.Add(encodeRecord(tx, []byte("changes")))
	f.Add(encodeRecord(tx, nil))
	f.Add([]byte{1, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, rec, err := decodeRecord(b)
		if err != nil {
			return
		}
		// Varints may come in longer forms than ours: compare decoded.
		got2, rec2, err := decodeRecord(encodeRecord(got, rec))
		if err != nil || got2 != got || !bytes.Equal(rec2, rec) {
			t.Fatalf("encoding what was decoded from % x changed it: %v %q -> %v %q (%v)", b, got, rec, got2, rec2, err)
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(encodeBatch([]Op{{Key: "a", Value: []byte("1")}, {Key: "b", Delete: true}})[1:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, err := decodeBatch(b)
		if err != nil {
			return
		}
		again, err := decodeBatch(encodeBatch(ops)[1:])
		if err != nil || fmt.Sprintf("%v", again) != fmt.Sprintf("%v", ops) {
			t.Fatalf("encoding what was decoded from % x changed it: %v -> %v (%v)", b, ops, again, err)
		}
	})
}
