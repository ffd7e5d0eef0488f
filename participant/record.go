package participant

import (
	"encoding/binary"
	"encoding/hex"

	"github.com/djinn-go/djinn"
)

// The library's keys in the Store.
const (
	// selfKey holds the participant's service and object ids.
	selfKey = ReservedPrefix + "self"
	// preparedPrefix starts the prepared records (TX.2.8).
	preparedPrefix = ReservedPrefix + "prepared/"
	// committedPrefix starts the markers of transactions committed by
	// prepareAndCommit, kept until their manager is known to have decided.
	committedPrefix = ReservedPrefix + "committed/"

	// recordVersion is the version of the prepared records written: 2
	// carries the transaction's secret; 1, read still, does not.
	recordVersion = 2
)

// preparedKey is the Store key of tx's prepared record.
func preparedKey(tx Tx) string { return txKey(preparedPrefix, tx) }

// committedKey is the Store key of tx's committed marker.
func committedKey(tx Tx) string { return txKey(committedPrefix, tx) }

// txKey is prefix, then tx's manager's service and object ids in hex, a
// slash and tx's id in 16 hex digits: one allocation, as every prepare
// and commit makes one.
func txKey(prefix string, tx Tx) string {
	var buf [128]byte // on the stack: the string is the one allocation
	b := append(buf[:0], prefix...)
	b = hex.AppendEncode(b, tx.Manager.Service[:])
	b = hex.AppendEncode(b, tx.Manager.Object[:])
	b = append(b, '/')
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], tx.ID)
	b = hex.AppendEncode(b, id[:])
	return string(b)
}

// encodeRecord returns a prepared record: the transaction (with the
// manager's endpoint, to ask it for the roll decision, and its secret, to
// take the manager's calls on it after a restart) and the resource's own
// record.
func encodeRecord(tx Tx, rec []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(tx.Manager.Endpoint)+56+len(rec))
	b = append(b, recordVersion)
	b = binary.AppendUvarint(b, uint64(len(tx.Manager.Endpoint)))
	b = append(b, tx.Manager.Endpoint...)
	b = append(b, tx.Manager.Service[:]...)
	b = append(b, tx.Manager.Object[:]...)
	b = binary.BigEndian.AppendUint64(b, tx.ID)
	b = append(b, tx.Secret[:]...)
	return append(b, rec...)
}

// decodeRecord reads a prepared record. The resource's record is a
// sub-slice of b.
func decodeRecord(b []byte) (Tx, []byte, error) {
	var tx Tx
	if len(b) == 0 || (b[0] != 1 && b[0] != recordVersion) {
		return tx, nil, djinn.Errorf(djinn.Internal, "prepared record: unknown version")
	}
	version := b[0]
	b = b[1:]
	l, k := binary.Uvarint(b)
	if k <= 0 || l > uint64(len(b)-k) {
		return tx, nil, djinn.Errorf(djinn.Internal, "prepared record: bad endpoint length")
	}
	tx.Manager.Endpoint = string(b[k : k+int(l)])
	b = b[k+int(l):]
	if len(b) < 40 {
		return tx, nil, djinn.Errorf(djinn.Internal, "prepared record: cut short")
	}
	copy(tx.Manager.Service[:], b[:16])
	copy(tx.Manager.Object[:], b[16:32])
	tx.ID = binary.BigEndian.Uint64(b[32:40])
	b = b[40:]
	if version >= 2 {
		if len(b) < len(tx.Secret) {
			return tx, nil, djinn.Errorf(djinn.Internal, "prepared record: cut short")
		}
		copy(tx.Secret[:], b)
		b = b[len(tx.Secret):]
	}
	return tx, b, nil
}
