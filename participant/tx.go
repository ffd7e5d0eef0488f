package participant

import (
	"crypto/subtle"
	"fmt"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Tx names a transaction: its manager and the id the manager gave it
// (TX.1.1), with its secret, the capability to work under it, which the
// manager gave its creator (zero for a transaction from before secrets).
// Two Tx are the same transaction when their managers are equal
// (djinn.Ref.Equal: service and object ids; the endpoint is only where to
// reach the manager, and changes when another member of a djinn cluster
// leads) and their ids are equal. Compare with Same, not ==.
//
// The participant joins with the secret, and from then on takes calls on
// the transaction — operations, and the manager's prepare, commit and
// abort — only with it: to anyone else it does not exist.
type Tx struct {
	Manager djinn.Ref
	ID      uint64
	Secret  djinn.ID
}

// TxOf returns the Tx of a client's transaction, with its secret.
func TxOf(t *client.Transaction) *Tx {
	return &Tx{Manager: t.Manager().Ref(), ID: t.ID(), Secret: t.Secret()}
}

// admits reports, in constant time, whether a call that presents tx may
// act on the transaction this participant holds as held: with its
// secret, when the participant knows one.
func (held Tx) admits(tx Tx) bool {
	return held.Secret.IsZero() || subtle.ConstantTimeCompare(held.Secret[:], tx.Secret[:]) == 1
}

// Same reports whether t and o name the same transaction.
func (t Tx) Same(o Tx) bool { return t.ID == o.ID && t.Manager.Equal(o.Manager) }

// Key returns t's identity, usable as a map key.
func (t Tx) Key() TxKey { return TxKey{Service: t.Manager.Service, Object: t.Manager.Object, ID: t.ID} }

func (t Tx) String() string { return fmt.Sprintf("transaction %d of %s", t.ID, t.Manager) }

// TxKey is the identity of a transaction: its manager's service and object
// ids and its id.
type TxKey struct {
	Service, Object djinn.ID
	ID              uint64
}

// check checks that t names a manager that can be called.
func (t Tx) check() error {
	if t.Manager.Service.IsZero() || t.Manager.Object.IsZero() {
		return djinn.Errorf(djinn.InvalidArgument, "transaction %d: manager reference %s has no ids", t.ID, t.Manager)
	}
	if err := djinn.CheckEndpoint(t.Manager.Endpoint); err != nil {
		return djinn.Errorf(djinn.InvalidArgument, "transaction %d: manager %v", t.ID, err)
	}
	return nil
}

// State is a transaction's state as a participant sees it, and a vote
// (TX.2.4's TransactionConstants; the numbers are the specification's).
type State int

// The states (TX.2.4, TX.2.6).
const (
	Active     State = 1
	Voting     State = 2
	Prepared   State = 3
	NotChanged State = 4
	Committed  State = 5
	Aborted    State = 6
)

var stateNames = [...]string{"UNKNOWN", "ACTIVE", "VOTING", "PREPARED", "NOTCHANGED", "COMMITTED", "ABORTED"}

func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("State(%d)", int(s))
	}
	return stateNames[s]
}

// Proto returns the wire form of s.
func (s State) Proto() djinnpb.TransactionState { return djinnpb.TransactionState(s) }

// StateFromProto converts a wire state.
func StateFromProto(s djinnpb.TransactionState) State { return State(s) }

// final reports whether s is an end state: nothing more will change.
func (s State) final() bool { return s == NotChanged || s == Committed || s == Aborted }
