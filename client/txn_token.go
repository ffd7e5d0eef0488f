package client

import (
	"strconv"
	"strings"

	"github.com/djinn-go/djinn"
)

// A transaction's token is its capability in print: its id and its secret,
// "ID.SECRET" (the id in decimal, the secret in 32 hex digits), as the CLI
// prints and takes it. With its manager's reference it is all a program
// needs to work under the transaction (TransactionManager.TransactionOf).

// Token returns the transaction's token, "ID.SECRET"; only "ID" for one
// named by its id alone.
func (t *Transaction) Token() string {
	id := strconv.FormatUint(t.id, 10)
	if t.secret.IsZero() {
		return id
	}
	return id + "." + t.secret.String()
}

// ParseTransactionToken reads a transaction's token: "ID.SECRET", or an id
// alone (its secret zero), which names the transaction without the right
// to work under it. Errors name what is wrong, never the secret.
func ParseTransactionToken(s string) (id uint64, secret djinn.ID, err error) {
	ids, sec, hasSecret := strings.Cut(strings.TrimSpace(s), ".")
	id, perr := strconv.ParseUint(ids, 10, 64)
	if perr != nil || id == 0 {
		return 0, djinn.ID{}, djinn.Errorf(djinn.InvalidArgument, "transaction %q: want ID or ID.SECRET, the id a decimal number from 1", abbrev(ids))
	}
	if !hasSecret {
		return id, djinn.ID{}, nil
	}
	if len(sec) != 32 {
		return 0, djinn.ID{}, djinn.Errorf(djinn.InvalidArgument, "transaction %d: its secret has %d characters, want 32 hex digits", id, len(sec))
	}
	secret, perr = djinn.ParseID(sec)
	if perr != nil || secret.IsZero() {
		return 0, djinn.ID{}, djinn.Errorf(djinn.InvalidArgument, "transaction %d: its secret is not 32 hex digits", id)
	}
	return id, secret, nil
}

// secretFromProto reads a transaction's secret from the wire: 16 bytes,
// or none.
func secretFromProto(what string, b []byte) (djinn.ID, error) {
	var s djinn.ID
	switch len(b) {
	case 0:
	case len(s):
		copy(s[:], b)
	default:
		return s, djinn.Errorf(djinn.Internal, "%s: %d bytes, want 16", what, len(b))
	}
	return s, nil
}
