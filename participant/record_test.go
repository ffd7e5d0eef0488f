package participant

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/djinn-go/djinn"
)

func FuzzDecodeRecord(f *testing.F) {
	tx := Tx{Manager: djinn.Ref{Endpoint: "127.0.0.1:4160", Service: djinn.NewID(), Object: djinn.NewID()}, ID: 42}
	f.Add(encodeRecord(tx, []byte("changes")))
	f.Add(encodeRecord(tx, nil))
	tx.Secret = djinn.NewID()
	f.Add(encodeRecord(tx, []byte("changes")))
	f.Add(v1Record(tx, []byte("changes")))
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

// v1Record is tx's prepared record as version 1 wrote it, without the
// secret.
func v1Record(tx Tx, rec []byte) []byte {
	b := append([]byte{1, byte(len(tx.Manager.Endpoint))}, tx.Manager.Endpoint...)
	b = append(b, tx.Manager.Service[:]...)
	b = append(b, tx.Manager.Object[:]...)
	b = binary.BigEndian.AppendUint64(b, tx.ID)
	return append(b, rec...)
}

// TestRecordVersions: a record keeps the transaction's secret, and one
// written before records had secrets still reads, without one.
func TestRecordVersions(t *testing.T) {
	tx := Tx{Manager: djinn.Ref{Endpoint: "127.0.0.1:4160", Service: djinn.NewID(), Object: djinn.NewID()}, ID: 42, Secret: djinn.NewID()}
	got, rec, err := decodeRecord(encodeRecord(tx, []byte("changes")))
	if err != nil || got != tx || string(rec) != "changes" {
		t.Fatalf("record: %v %q %v, want %v", got, rec, err, tx)
	}
	got, rec, err = decodeRecord(v1Record(tx, []byte("changes")))
	want := tx
	want.Secret = djinn.ID{}
	if err != nil || got != want || string(rec) != "changes" {
		t.Fatalf("version 1 record: %v %q %v, want %v", got, rec, err, want)
	}
	if _, _, err := decodeRecord(encodeRecord(tx, nil)[:60]); err == nil {
		t.Fatal("a record cut in its secret decoded")
	}
}

// TestRecordKeysKeepTheirForm: the keys of prepared records and committed
// markers are on disk, so the form a restarted participant reads them in
// is the one they were written in — prefix, the manager's service and
// object ids in hex, "/", the id in 16 hex digits (TX.2.8).
func TestRecordKeysKeepTheirForm(t *testing.T) {
	for _, tx := range []Tx{
		{ID: 1},
		{Manager: djinn.Ref{Endpoint: "127.0.0.1:4160", Service: djinn.NewID(), Object: djinn.NewID()}, ID: 42},
		{Manager: djinn.Ref{Service: djinn.ID{0xff}, Object: djinn.ID{15: 0x0a}}, ID: 1<<64 - 1},
	} {
		for _, k := range []struct {
			prefix string
			got    string
		}{{preparedPrefix, preparedKey(tx)}, {committedPrefix, committedKey(tx)}} {
			want := fmt.Sprintf("%s%s%s/%016x", k.prefix, tx.Manager.Service, tx.Manager.Object, tx.ID)
			if k.got != want {
				t.Errorf("key of %v: %q, want %q", tx, k.got, want)
			}
		}
	}
}
