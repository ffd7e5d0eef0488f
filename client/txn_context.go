package client

import (
	"context"
	"strconv"

	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
)

// The gRPC metadata keys that carry the current transaction on a call
// (WithTransaction): the manager's reference in its printable form
// (djinn://host:port/SERVICE/OBJECT), the transaction id in decimal, and
// its secret in 32 hex digits (absent for a transaction named by id
// alone). A call carries the first two or neither.
const (
	TxnManagerMetadataKey = "djinn-txn-manager"
	TxnIDMetadataKey      = "djinn-txn-id"
	TxnSecretMetadataKey  = "djinn-txn-secret"
)

type txnKey struct{}

// WithTransaction returns a context whose current transaction is t, for
// the calls made under it: TransactionFrom finds t in the call chain, and
// every gRPC call made with the context carries t in its metadata, where
// the server reads it back with TransactionFromIncoming. This is how a
// transaction travels implicitly with the work done under it.
//
// WithTransaction(ctx, nil) returns a context with no current
// transaction: calls under it carry none, even if ctx had one.
func WithTransaction(ctx context.Context, t *Transaction) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx) // a copy: ours to change
	if md == nil {
		md = metadata.MD{}
	}
	md.Delete(TxnSecretMetadataKey)
	if t == nil {
		md.Delete(TxnManagerMetadataKey)
		md.Delete(TxnIDMetadataKey)
	} else {
		md.Set(TxnManagerMetadataKey, t.mgr.ref.String())
		md.Set(TxnIDMetadataKey, strconv.FormatUint(t.id, 10))
		if !t.secret.IsZero() {
			md.Set(TxnSecretMetadataKey, t.secret.String())
		}
	}
	return context.WithValue(metadata.NewOutgoingContext(ctx, md), txnKey{}, t)
}

// TransactionFrom returns the current transaction set by WithTransaction,
// and whether there is one.
func TransactionFrom(ctx context.Context) (*Transaction, bool) {
	t, _ := ctx.Value(txnKey{}).(*Transaction)
	return t, t != nil
}

// TransactionFromIncoming returns the transaction a gRPC call carries in
// its metadata (sent by a client's WithTransaction), for the server that
// handles the call: a participant joins it, a lock service locks under it.
// Calls on the transaction go through c. It returns nil and no error when
// the call carries no transaction, and djinn.ErrInvalidArgument naming the
// metadata key when it carries a malformed one, or only half of one.
//
// The manager's reference comes from the caller: a server that joins the
// transaction calls whatever endpoint the caller named, as with any
// reference a client passes.
func TransactionFromIncoming(ctx context.Context, c Connector) (*Transaction, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	mgr, id, ok, err := parseTxnMetadata(md)
	if err != nil || !ok {
		return nil, err
	}
	var secret djinn.ID
	switch sv := md.Get(TxnSecretMetadataKey); {
	case len(sv) > 1:
		return nil, djinn.Errorf(djinn.InvalidArgument, "metadata %s: %d values, want one", TxnSecretMetadataKey, len(sv))
	case len(sv) == 1:
		if secret, err = djinn.ParseID(sv[0]); err != nil || len(sv[0]) != 32 {
			return nil, djinn.Errorf(djinn.InvalidArgument, "metadata %s: want 32 hex digits", TxnSecretMetadataKey)
		}
	}
	return NewTransactionManager(c, mgr).TransactionOf(id, secret), nil
}

// parseTxnMetadata reads the transaction in md: ok is false when md
// carries none.
func parseTxnMetadata(md metadata.MD) (mgr djinn.Ref, id uint64, ok bool, err error) {
	mv, iv := md.Get(TxnManagerMetadataKey), md.Get(TxnIDMetadataKey)
	switch {
	case len(mv) == 0 && len(iv) == 0:
		return mgr, 0, false, nil
	case len(mv) == 0:
		return mgr, 0, false, djinn.Errorf(djinn.InvalidArgument, "metadata %s: missing (%s is set)", TxnManagerMetadataKey, TxnIDMetadataKey)
	case len(iv) == 0:
		return mgr, 0, false, djinn.Errorf(djinn.InvalidArgument, "metadata %s: missing (%s is set)", TxnIDMetadataKey, TxnManagerMetadataKey)
	case len(mv) > 1:
		return mgr, 0, false, djinn.Errorf(djinn.InvalidArgument, "metadata %s: %d values, want one", TxnManagerMetadataKey, len(mv))
	case len(iv) > 1:
		return mgr, 0, false, djinn.Errorf(djinn.InvalidArgument, "metadata %s: %d values, want one", TxnIDMetadataKey, len(iv))
	}
	mgr, err = djinn.ParseRef(mv[0])
	if err != nil {
		return djinn.Ref{}, 0, false, djinn.Errorf(djinn.InvalidArgument, "metadata %s: %v", TxnManagerMetadataKey, err)
	}
	if mgr.Service.IsZero() || mgr.Object.IsZero() {
		return djinn.Ref{}, 0, false, djinn.Errorf(djinn.InvalidArgument, "metadata %s %q: names no object (zero service or object id)", TxnManagerMetadataKey, mv[0])
	}
	id, err = strconv.ParseUint(iv[0], 10, 64)
	if err != nil || id == 0 {
		return djinn.Ref{}, 0, false, djinn.Errorf(djinn.InvalidArgument, "metadata %s %q: want a transaction id, a decimal number from 1", TxnIDMetadataKey, abbrev(iv[0]))
	}
	return mgr, id, true, nil
}
