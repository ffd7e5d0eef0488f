package state

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
)

// Part is one service's share of the replicated state, as the Machine
// iterates it. A service builds its part from its own state and adds it
// with Machine.Add; nothing else in the machine names the service.
//
// Every function of a part runs inside Apply, Snapshot or Restore, one at a
// time, and must be deterministic: time only from the command, no I/O, no
// goroutines.
type Part struct {
	// Name names the part in errors.
	Name string
	// Commands apply the part's commands: one per Command op, made with On.
	Commands []Command
	// Records restore the part's snapshot records: one per Record kind,
	// made with Restores.
	Records []Record
	// View takes a view of the part's state now, without copying its
	// records (the lease table's and the mailbox's slabs copy a chunk
	// only when it changes while a view is held), and returns the Dump
	// that writes it later, outside Apply while applies go on, and the
	// function that lets the view go once written or given up. A part
	// with many records takes a view: a snapshot then costs no memory
	// for the state it writes.
	View func() (Dump, func())
	// Snapshot, for a part without a View, gathers the part's records now
	// and returns the function that writes them, later and outside Apply,
	// in the order Restore is to read them. Nil with View nil: the part
	// keeps nothing in snapshots.
	Snapshot func() (Dump, error)
	// Reset empties the part before a snapshot is restored.
	Reset func()
	// Restored, if set, is told once a snapshot's last record is read: a
	// part whose records span several (a document cut into pieces)
	// returns an error when the snapshot ended inside them, so that a
	// snapshot cut short is refused rather than restored as less.
	Restored func() error
	// Leases are the kinds of lease the part owns.
	Leases []LeaseKind
}

// Dump writes a part's snapshot records, one call of emit per record. A
// record is the message of one of the Record kinds the part restores.
type Dump func(emit func(proto.Message) error) error

// LeaseKind is a kind of lease and what its owner does when one ends.
type LeaseKind struct {
	// Kind is the number leases of this kind carry in the log and in
	// snapshots: once used, it never changes.
	Kind lease.Kind
	Name string
	// Quota is the quota leases of this kind count towards, beside
	// quota.Leases (none: only that one).
	Quota quota.Name
	// Ended is told, inside the Apply of a cancel or expiry, that a lease
	// of this kind ended. It is not told of leases the owner releases
	// itself (lease.Table.ApplyRelease).
	Ended func(lease.Owner)
}

// Command applies one command type; On makes one.
type Command struct {
	msg   protoreflect.MessageDescriptor
	apply func(now int64, m proto.Message) any
}

// On returns the handler of the command whose op is a C: apply gets the
// command's time (unix nanos, from the leader) and the op, and returns the
// result Propose hands back — an error, or any value.
func On[C proto.Message](apply func(now int64, c C) any) Command {
	var zero C
	return Command{
		msg:   zero.ProtoReflect().Descriptor(),
		apply: func(now int64, m proto.Message) any { return apply(now, m.(C)) },
	}
}

// Record restores one kind of snapshot record; Restores makes one.
type Record struct {
	msg     protoreflect.MessageDescriptor
	restore func(m proto.Message) error
}

// Restores returns the restorer of the snapshot records that are an R.
func Restores[R proto.Message](restore func(r R) error) Record {
	var zero R
	return Record{
		msg:     zero.ProtoReflect().Descriptor(),
		restore: func(m proto.Message) error { return restore(m.(R)) },
	}
}

// Result is an apply result from a (value, error) pair: the error when
// there is one, else the value.
func Result[T any](v T, err error) any {
	if err != nil {
		return err
	}
	return v
}

// Each returns the Dump of records gathered already.
func Each[R proto.Message](recs []R) Dump {
	return func(emit func(proto.Message) error) error {
		for _, r := range recs {
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	}
}
