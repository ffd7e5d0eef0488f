package client

import (
	"context"
	"encoding/hex"
	"fmt"

	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LockHolder is who holds, asks for or gives up a lock (CC 1.2.1, 1.2.2): a
// lock owner, a transaction of any djinn transaction manager, or — the
// zero LockHolder, Implicit — the transaction in the call's context (CC
// 2.3's implicit mode: the caller's current transaction, set with
// WithTransaction). Build one with HeldByOwner, HeldByOwnerCookie or
// HeldByTransaction. A builder given nothing (a nil owner or transaction,
// a zero cookie) returns a holder with which every call fails with
// djinn.ErrInvalidArgument.
//
// In a transactional set (CC 2.4) only transactions hold locks; in the
// others owners and transactions both do. A transaction's locks are held
// until it commits or aborts (strict two-phase locking, CC 1.4), when the
// service, a participant in it, drops them or (for a nested transaction
// that commits) passes them to its parent (CC 1.5).
type LockHolder struct {
	kind  holderKind
	owner djinn.ID     // holderOwner
	seen  [16]byte     // holderSeenOwner: the first bytes of SHA-256 of the cookie
	tx    *Transaction // holderTxn
	bad   string       // why every call with this holder fails; "" when it is usable
}

type holderKind uint8

const (
	holderImplicit holderKind = iota
	holderOwner
	holderTxn
	// holderSeenOwner is an owner as Describe names it: by a fingerprint
	// of its cookie, which the service never gives out.
	holderSeenOwner
)

// Implicit is the holder of CC 2.3's implicit mode: the transaction in the
// call's context (WithTransaction). It is the zero LockHolder. A call with
// it and a context that carries no transaction fails with
// djinn.ErrInvalidArgument.
var Implicit LockHolder

// HeldByOwner returns the holder that is lock owner o.
func HeldByOwner(o *LockOwner) LockHolder {
	if o == nil || o.lease == nil {
		return LockHolder{kind: holderOwner, bad: "lock owner: missing (nil)"}
	}
	return HeldByOwnerCookie(o.lease.Cookie())
}

// HeldByOwnerCookie returns the holder that is the lock owner named by
// cookie, its lease's cookie: for an owner created elsewhere, whose lease
// token was passed along (ParseToken gives its Lease, and Cookie the
// cookie).
func HeldByOwnerCookie(cookie djinn.ID) LockHolder {
	h := LockHolder{kind: holderOwner, owner: cookie}
	if cookie.IsZero() {
		h.bad = "lock owner cookie: zero"
	}
	return h
}

// HeldByTransaction returns the holder that is transaction tx, of any
// manager: TransactionalLockSet's explicit mode (CC 2.4). The service
// joins tx as a participant at its first lock.
func HeldByTransaction(tx *Transaction) LockHolder {
	h := LockHolder{kind: holderTxn, tx: tx}
	switch {
	case tx == nil:
		h.bad = "lock holder transaction: missing (nil)"
	case tx.id == 0:
		h.bad = "lock holder transaction id 0: want a transaction id, from 1"
	case tx.mgr == nil || tx.mgr.ref.Service.IsZero() || tx.mgr.ref.Object.IsZero():
		h.bad = fmt.Sprintf("lock holder %s: its manager names no object (zero service or object id)", tx)
	}
	return h
}

// IsImplicit reports whether h is Implicit: the transaction of the call's
// context.
func (h LockHolder) IsImplicit() bool { return h.kind == holderImplicit }

// Owner returns the cookie of the lock owner h is, and whether h is an
// owner named by its cookie. An owner read by Describe is named only by a
// fingerprint (IsOwner, String): the cookie is a capability.
func (h LockHolder) Owner() (djinn.ID, bool) { return h.owner, h.kind == holderOwner }

// IsOwner reports whether h is a lock owner, named by its cookie or, as
// Describe names holders, by its fingerprint.
func (h LockHolder) IsOwner() bool { return h.kind == holderOwner || h.kind == holderSeenOwner }

// fingerprint names an owner: the hex of the first four bytes of SHA-256
// of its cookie, as its lease's String prints it.
func (h LockHolder) fingerprint() string {
	if h.kind == holderSeenOwner {
		return hex.EncodeToString(h.seen[:4])
	}
	return (&Lease{cookie: h.owner}).fingerprint()
}

// Transaction returns the transaction h is, or nil if h is not one. A
// holder read by Describe names its transaction's manager by identity
// only: its reference has no endpoint.
func (h LockHolder) Transaction() *Transaction {
	if h.kind != holderTxn {
		return nil
	}
	return h.tx
}

// Equal reports whether h and o are the same holder: the same owner, the
// same transaction (Transaction.Equal: whatever endpoint names the
// manager), or both Implicit.
func (h LockHolder) Equal(o LockHolder) bool {
	if h.kind != o.kind {
		return false
	}
	switch h.kind {
	case holderOwner:
		return h.owner == o.owner
	case holderSeenOwner:
		return h.seen == o.seen
	case holderTxn:
		return h.tx.Equal(o.tx)
	}
	return true
}

// String names the holder: "owner 1a2b3c4d" (a fingerprint of the cookie,
// the one the owner's lease's String prints: the cookie is a capability),
// "transaction 7 of djinn://…", or "implicit".
func (h LockHolder) String() string {
	switch h.kind {
	case holderOwner, holderSeenOwner:
		return "owner " + h.fingerprint()
	case holderTxn:
		if h.tx == nil {
			return "transaction (nil)"
		}
		return h.tx.String()
	}
	return "implicit"
}

// proto returns h's wire form for a call made with ctx: nil for Implicit,
// once ctx is seen to carry a transaction.
func (h LockHolder) proto(ctx context.Context) (*djinnpb.LockHolder, error) {
	if h.bad != "" {
		return nil, djinn.Errorf(djinn.InvalidArgument, "%s", h.bad)
	}
	switch h.kind {
	case holderOwner:
		o := &ownerProto{id: h.owner}
		o.pb.Owner = o.id[:]
		return &o.pb, nil
	case holderTxn:
		return txnRefProto(h.tx), nil
	case holderSeenOwner:
		return nil, djinn.Errorf(djinn.InvalidArgument, "lock holder %s: known by its fingerprint only; name it by its cookie (HeldByOwnerCookie)", h)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	_, _, ok, err := parseTxnMetadata(md)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lock holder: implicit, but the context carries no transaction: "+
			"name an owner (HeldByOwner) or a transaction (HeldByTransaction), or call within one (WithTransaction)")
	}
	return nil, nil
}

// ownerProto is an owner holder as a call sends it, with the cookie its
// Owner field points at: one allocation.
type ownerProto struct {
	pb djinnpb.LockHolder
	id djinn.ID
}

func txnRefProto(tx *Transaction) *djinnpb.LockHolder {
	return &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: RefToProto(tx.mgr.ref), Id: tx.id, Secret: wire.TxnSecretBytes(tx.secret)}}
}

// holderFromProto converts a holder the service named; c reaches the
// managers of transactions.
func holderFromProto(what string, c Connector, pb *djinnpb.LockHolder) (LockHolder, error) {
	owner, t := pb.GetOwner(), pb.GetTransaction()
	if fp := pb.GetOwnerFingerprint(); len(fp) > 0 {
		if len(fp) != 16 || len(owner) > 0 || t != nil {
			return LockHolder{}, djinn.Errorf(djinn.InvalidArgument, "%s: owner fingerprint of %d bytes (want 16, alone)", what, len(fp))
		}
		h := LockHolder{kind: holderSeenOwner}
		copy(h.seen[:], fp)
		return h, nil
	}
	switch {
	case len(owner) > 0 && t != nil:
		return LockHolder{}, djinn.Errorf(djinn.InvalidArgument, "%s: names both an owner and a transaction", what)
	case len(owner) > 0:
		id, err := djinn.IDFromBytes(what+" owner", owner)
		if err != nil {
			return LockHolder{}, err
		}
		return HeldByOwnerCookie(id), nil
	case t != nil:
		ref, err := RefFromProto(what+" transaction manager", t.GetManager())
		if err != nil {
			return LockHolder{}, err
		}
		if t.GetId() == 0 {
			return LockHolder{}, djinn.Errorf(djinn.InvalidArgument, "%s transaction id: missing", what)
		}
		return HeldByTransaction(NewTransactionManager(c, ref).Transaction(t.GetId())), nil
	}
	return LockHolder{}, djinn.Errorf(djinn.InvalidArgument, "%s: names neither an owner nor a transaction", what)
}
