// Package state composes djinn's replicated state machine: it decodes each
// committed command and hands it to the service state it belongs to, and
// writes and reads snapshots as a stream of records.
//
// It is deterministic (replica.StateMachine): time comes only from the
// command, and nothing here reads the clock, does I/O outside a snapshot, or
// starts goroutines. Leases and the services they guard change together: a
// lease's end (cancel or expiry) removes its resource in the same Apply.
package state

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Machine is the whole replicated state of a djinn server.
type Machine struct {
	Leases  *lease.Table
	Mailbox *mailbox.State
	Renewal *renewal.State
	Txn     *txn.State
	Lock    *lock.State
	Lookup  *lookup.State
	LDS     *lds.State

	mu sync.Mutex
	// service and members are guarded by mu.
	service djinn.ID
	members map[string]string // node id -> gRPC address
}

var _ replica.StateMachine = (*Machine)(nil)

// New returns an empty state machine.
func New() *Machine {
	m := &Machine{members: map[string]string{}}
	m.Leases = lease.NewTable()
	m.Mailbox = mailbox.NewState(m.Leases, mailbox.DefaultMaxStored, m.ServiceID)
	m.Renewal = renewal.NewState(m.Leases, m.ServiceID)
	m.Txn = txn.NewState(m.Leases)
	m.Lock = lock.NewState(m.Leases)
	m.Lookup = lookup.NewState(m.Leases, m.ServiceID, lookup.Limits{})
	m.LDS = lds.NewState(m.Leases)
	return m
}

// leasesEnded tells the owners of leases a cancel or expiry ended.
func (m *Machine) leasesEnded(owners []lease.Owner) {
	for _, o := range owners {
		m.leaseEnded(o)
	}
}

func (m *Machine) leaseEnded(o lease.Owner) {
	switch o.Kind {
	case lease.KindMailbox:
		m.Mailbox.LeaseEnded(o.ID)
	case lease.KindRenewalSet:
		m.Renewal.LeaseEnded(o.ID)
	case lease.KindTransaction:
		m.Txn.LeaseEnded(o.ID)
	case lease.KindLockSet, lease.KindLockOwner:
		m.Lock.LeaseEnded(o)
	case lease.KindLookupItem, lease.KindLookupWatch:
		m.Lookup.LeaseEnded(o)
	case lease.KindLDSRegistration:
		m.LDS.LeaseEnded(o.ID)
	}
}

// ServiceID returns the cluster's service id (zero before Init applies).
func (m *Machine) ServiceID() djinn.ID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.service
}

// Endpoint returns a member's gRPC address.
func (m *Machine) Endpoint(node string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.members[node]
}

// Apply implements replica.StateMachine.
func (m *Machine) Apply(index uint64, cmd *statepb.Command) any {
	switch op := cmd.Op.(type) {
	case *statepb.Command_Init:
		id, err := djinn.IDFromBytes("service id", op.Init.GetServiceId())
		if err != nil {
			return err
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.service.IsZero() {
			m.service = id
		}
		return m.service
	case *statepb.Command_Member:
		m.mu.Lock()
		defer m.mu.Unlock()
		m.members[op.Member.GetNodeId()] = op.Member.GetGrpcAddress()
		return nil
	case *statepb.Command_LeaseCancel:
		errs, ended := m.Leases.ApplyCancel(op.LeaseCancel.GetCookies())
		m.leasesEnded(ended)
		return errs
	case *statepb.Command_LeaseExpire:
		m.leasesEnded(m.Leases.ApplyExpire(op.LeaseExpire.GetCookies()))
		return nil
	case *statepb.Command_LeaseHorizon:
		m.Leases.ApplyHorizon(op.LeaseHorizon.GetEntries())
		return nil
	case *statepb.Command_MailboxRegister:
		in, err := m.Mailbox.ApplyRegister(op.MailboxRegister)
		if err != nil {
			return err
		}
		return in
	case *statepb.Command_MailboxEnable:
		done, err := m.Mailbox.ApplyEnable(op.MailboxEnable)
		if err != nil {
			return err
		}
		return done
	case *statepb.Command_MailboxDisable:
		done, err := m.Mailbox.ApplyDisable(op.MailboxDisable)
		if err != nil {
			return err
		}
		return done
	case *statepb.Command_MailboxStore:
		return m.Mailbox.ApplyStore(op.MailboxStore)
	case *statepb.Command_MailboxDelivered:
		m.Mailbox.ApplyDelivered(op.MailboxDelivered)
		return nil
	case *statepb.Command_MailboxUnknown:
		return m.Mailbox.ApplyUnknown(op.MailboxUnknown)
	case *statepb.Command_RenewalCreate:
		in, err := m.Renewal.ApplyCreate(op.RenewalCreate)
		if err != nil {
			return err
		}
		return in
	case *statepb.Command_RenewalAdd:
		res, err := m.Renewal.ApplyAdd(cmd.GetNowUnixNanos(), op.RenewalAdd)
		if err != nil {
			return err
		}
		return res
	case *statepb.Command_RenewalRemove:
		c, err := m.Renewal.ApplyRemove(op.RenewalRemove)
		if err != nil {
			return err
		}
		return c
	case *statepb.Command_RenewalListen:
		res, err := m.Renewal.ApplyListen(op.RenewalListen)
		if err != nil {
			return err
		}
		return res
	case *statepb.Command_RenewalRenewed:
		m.Renewal.ApplyRenewed(cmd.GetNowUnixNanos(), op.RenewalRenewed)
		return nil
	case *statepb.Command_RenewalEnd:
		m.Renewal.ApplyEnd(cmd.GetNowUnixNanos(), op.RenewalEnd)
		return nil
	case *statepb.Command_RenewalWarn:
		m.Renewal.ApplyWarn(op.RenewalWarn)
		return nil
	case *statepb.Command_RenewalDelivered:
		m.Renewal.ApplyDelivered(op.RenewalDelivered)
		return nil
	case *statepb.Command_TxnCreate:
		in, err := m.Txn.ApplyCreate(op.TxnCreate)
		if err != nil {
			return err
		}
		return in
	case *statepb.Command_TxnJoin:
		return m.Txn.ApplyJoin(cmd.GetNowUnixNanos(), op.TxnJoin)
	case *statepb.Command_TxnVoting:
		in, err := m.Txn.ApplyVoting(op.TxnVoting)
		if err != nil {
			return err
		}
		return in
	case *statepb.Command_TxnDecide:
		in, err := m.Txn.ApplyDecide(cmd.GetNowUnixNanos(), op.TxnDecide)
		if err != nil {
			return err
		}
		return in
	case *statepb.Command_TxnNotified:
		m.Txn.ApplyNotified(op.TxnNotified)
		return nil
	case *statepb.Command_TxnPromote:
		return m.Txn.ApplyPromote(cmd.GetNowUnixNanos(), op.TxnPromote)
	case *statepb.Command_TxnForget:
		m.Txn.ApplyForget(op.TxnForget)
		return nil
	case *statepb.Command_LockCreateSet:
		return m.Lock.ApplyCreateSet(op.LockCreateSet)
	case *statepb.Command_LockCreateOwner:
		return m.Lock.ApplyCreateOwner(op.LockCreateOwner)
	case *statepb.Command_LockAcquire:
		res, err := m.Lock.ApplyAcquire(op.LockAcquire)
		if err != nil {
			return err
		}
		return res
	case *statepb.Command_LockRelease:
		return m.Lock.ApplyRelease(op.LockRelease)
	case *statepb.Command_LockCancel:
		m.Lock.ApplyCancel(op.LockCancel)
		return nil
	case *statepb.Command_LockTxnEnd:
		m.Lock.ApplyTxnEnd(op.LockTxnEnd)
		return nil
	case *statepb.Command_LockDrop:
		return m.Lock.ApplyDrop(op.LockDrop)
	case *statepb.Command_LookupRegister:
		return m.Lookup.ApplyRegister(op.LookupRegister)
	case *statepb.Command_LookupAttributes:
		return m.Lookup.ApplyAttributes(op.LookupAttributes)
	case *statepb.Command_LookupNotify:
		id, err := m.Lookup.ApplyNotify(op.LookupNotify)
		if err != nil {
			return err
		}
		return id
	case *statepb.Command_LdsRegister:
		id, err := m.LDS.ApplyRegister(op.LdsRegister)
		if err != nil {
			return err
		}
		return id
	case *statepb.Command_LdsGroups:
		info, err := m.LDS.ApplyGroups(op.LdsGroups)
		if err != nil {
			return err
		}
		return info
	case *statepb.Command_LdsLocators:
		info, err := m.LDS.ApplyLocators(op.LdsLocators)
		if err != nil {
			return err
		}
		return info
	case *statepb.Command_LdsDiscard:
		discarded, err := m.LDS.ApplyDiscard(op.LdsDiscard)
		if err != nil {
			return err
		}
		return discarded
	case *statepb.Command_LdsFound:
		return m.LDS.ApplyFound(op.LdsFound)
	case *statepb.Command_LdsLost:
		return m.LDS.ApplyLost(op.LdsLost)
	}
	return djinn.Errorf(djinn.Internal, "log entry %d: unknown command %T", index, cmd.Op)
}

// Snapshot implements replica.StateMachine: it gathers the records now and
// writes them, length-delimited, later.
func (m *Machine) Snapshot() (func(io.Writer) error, error) {
	var recs []*statepb.Record
	m.mu.Lock()
	if !m.service.IsZero() {
		recs = append(recs, &statepb.Record{Record: &statepb.Record_Init{Init: &statepb.Init{ServiceId: m.service[:]}}})
	}
	for node, addr := range m.members {
		recs = append(recs, &statepb.Record{Record: &statepb.Record_Member{Member: &statepb.Member{NodeId: node, GrpcAddress: addr}}})
	}
	m.mu.Unlock()
	for _, l := range m.Leases.Records() {
		recs = append(recs, &statepb.Record{Record: &statepb.Record_Lease{Lease: l}})
	}
	for _, r := range m.Mailbox.Records() {
		recs = append(recs, &statepb.Record{Record: &statepb.Record_Mailbox{Mailbox: r}})
	}
	counter, txns := m.Txn.Records()
	recs = append(recs, &statepb.Record{Record: &statepb.Record_TxnCounter{TxnCounter: counter}})
	for _, r := range txns {
		recs = append(recs, &statepb.Record{Record: &statepb.Record_Txn{Txn: r}})
	}
	locks, err := m.Lock.Records()
	if err != nil {
		return nil, err
	}
	for _, r := range locks {
		recs = append(recs, &statepb.Record{Record: &statepb.Record_Lock{Lock: r}})
	}
	lookups, err := m.Lookup.Records()
	if err != nil {
		return nil, err
	}
	for _, r := range lookups {
		recs = append(recs, &statepb.Record{Record: &statepb.Record_Lookup{Lookup: r}})
	}
	ldss, err := m.LDS.Records()
	if err != nil {
		return nil, err
	}
	for _, r := range ldss {
		recs = append(recs, &statepb.Record{Record: &statepb.Record_Lds{Lds: r}})
	}
	renewal := m.Renewal.Snapshot()
	return func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<16)
		for _, r := range recs {
			if _, err := protodelim.MarshalTo(bw, r); err != nil {
				return fmt.Errorf("write snapshot: %w", err)
			}
		}
		err := renewal(func(r *statepb.RenewalSetRecord) error {
			_, err := protodelim.MarshalTo(bw, &statepb.Record{Record: &statepb.Record_RenewalSet{RenewalSet: r}})
			return err
		})
		if err != nil {
			return fmt.Errorf("write snapshot: %w", err)
		}
		return bw.Flush()
	}, nil
}

// maxRecord bounds one snapshot record, so a corrupt length cannot make
// Restore allocate without limit.
const maxRecord = 64 << 20

// Restore implements replica.StateMachine.
func (m *Machine) Restore(r io.Reader) error {
	m.mu.Lock()
	m.service = djinn.ID{}
	m.members = map[string]string{}
	m.mu.Unlock()
	m.Leases.Reset()
	m.Mailbox.Reset()
	m.Renewal.Reset()
	m.Txn.Reset()
	m.Lock.Reset()
	m.Lookup.Reset()
	m.LDS.Reset()
	br := bufio.NewReaderSize(r, 1<<16)
	opts := protodelim.UnmarshalOptions{MaxSize: maxRecord}
	for n := 0; ; n++ {
		var rec statepb.Record
		if err := opts.UnmarshalFrom(br, &rec); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("snapshot record %d: %w", n, err)
		}
		if err := m.restore(&rec); err != nil {
			return fmt.Errorf("snapshot record %d: %w", n, err)
		}
	}
}

func (m *Machine) restore(rec *statepb.Record) error {
	switch r := rec.Record.(type) {
	case *statepb.Record_Init:
		id, err := djinn.IDFromBytes("service id", r.Init.GetServiceId())
		if err != nil {
			return err
		}
		m.mu.Lock()
		m.service = id
		m.mu.Unlock()
	case *statepb.Record_Member:
		m.mu.Lock()
		m.members[r.Member.GetNodeId()] = r.Member.GetGrpcAddress()
		m.mu.Unlock()
	case *statepb.Record_Lease:
		return m.Leases.Restore(r.Lease)
	case *statepb.Record_Mailbox:
		return m.Mailbox.Restore(r.Mailbox)
	case *statepb.Record_RenewalSet:
		return m.Renewal.Restore(r.RenewalSet)
	case *statepb.Record_TxnCounter:
		m.Txn.RestoreCounter(r.TxnCounter)
	case *statepb.Record_Txn:
		return m.Txn.Restore(r.Txn)
	case *statepb.Record_Lock:
		return m.Lock.Restore(r.Lock)
	case *statepb.Record_Lookup:
		return m.Lookup.Restore(r.Lookup)
	case *statepb.Record_Lds:
		return m.LDS.Restore(r.Lds)
	default:
		return djinn.Errorf(djinn.Internal, "unknown record %T", rec.Record)
	}
	return nil
}
