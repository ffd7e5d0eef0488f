// Package state composes djinn's replicated state machine. It holds the
// cluster's identity and the lease table, and every service adds its own
// Part: the handlers of its commands, its snapshot records and how to
// restore them, and the kinds of lease it owns. Apply decodes a committed
// command and hands it to the part that handles its type; Snapshot and
// Restore write and read every part's records as one stream.
//
// It is deterministic (replica.StateMachine): time comes only from the
// command, and nothing here reads the clock, does I/O outside a snapshot, or
// starts goroutines. Leases and the resources they guard change together:
// a cancel or expiry returns the leases it ended, and the machine hands
// each to the part that registered its kind, in the same Apply.
//
// What Apply decides is versioned (rules.go): the cluster's rules version
// is replicated state, and every member applies each entry by the version
// in force at it. A change to what an apply decides adds a version to the
// list in rules.go and branches on Machine.Rules where the rule differs,
// keeping the old rule for the entries applied by it; docs/DESIGN.md
// ("Rules versions") has the recipe.
package state

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Machine is the whole replicated state of a djinn server.
type Machine struct {
	Leases *lease.Table

	mu sync.Mutex
	// service and members are guarded by mu.
	service  djinn.ID
	previous []djinn.ID            // the service ids of the clusters this one was restored from
	members  map[string]MemberInfo // by node id
	known    chan struct{}         // closed once the machine first has a service id

	// The rules version (rules.go): the cluster's, the highest this
	// machine applies, and why it stopped applying, if it did.
	rules        atomic.Uint32
	max          atomic.Uint32
	rulesChanged chan struct{} // guarded by mu: closed and replaced when rules changes
	refusal      atomic.Pointer[RulesError]
	stopped      chan struct{} // closed with refusal set
	applying     uint64        // the index of the entry Apply applies

	// The parts and what they handle, fixed before the first Apply.
	parts    []Part
	commands map[protoreflect.FieldNumber]Command
	ops      map[reflect.Type]Command // commands by their op's Go type, for Apply
	records  map[protoreflect.FieldNumber]Record
	kinds    map[lease.Kind]LeaseKind
}

var _ replica.StateMachine = (*Machine)(nil)

// The oneofs of a command's op and of a snapshot record, which parts'
// handlers are keyed by.
var (
	opField     = (&statepb.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("op")
	recordField = (&statepb.Record{}).ProtoReflect().Descriptor().Oneofs().ByName("record")
)

// New returns a machine holding the cluster's identity and the lease
// table, and no service: each adds its Part.
func New() *Machine {
	m := &Machine{
		Leases:   lease.NewTable(),
		members:  map[string]MemberInfo{},
		known:    make(chan struct{}),
		stopped:  make(chan struct{}),
		commands: map[protoreflect.FieldNumber]Command{},
		ops:      map[reflect.Type]Command{},
		records:  map[protoreflect.FieldNumber]Record{},
		kinds:    map[lease.Kind]LeaseKind{},

		rulesChanged: make(chan struct{}),
	}
	m.max.Store(MaxRules())
	for _, p := range []Part{m.clusterPart(), m.leasePart()} {
		if err := m.Add(p); err != nil {
			panic(err) // the machine's own parts clash: a bug here
		}
	}
	return m
}

// Add adds a service's part. It refuses a part that handles a command or
// record another part handles, or a message that is no command op or
// record kind, or registers a lease kind already taken. Add every part
// before the first Apply or Restore.
func (m *Machine) Add(p Part) error {
	cmds, err := fieldsOf(p.Name, "command", opField, p.Commands, func(c Command) protoreflect.MessageDescriptor { return c.msg })
	if err != nil {
		return err
	}
	recs, err := fieldsOf(p.Name, "record", recordField, p.Records, func(r Record) protoreflect.MessageDescriptor { return r.msg })
	if err != nil {
		return err
	}
	for i, n := range cmds {
		if _, ok := m.commands[n]; ok {
			return djinn.Errorf(djinn.Internal, "state part %s: command %s has a handler already", p.Name, p.Commands[i].msg.Name())
		}
	}
	for i, n := range recs {
		if _, ok := m.records[n]; ok {
			return djinn.Errorf(djinn.Internal, "state part %s: record %s has a restorer already", p.Name, p.Records[i].msg.Name())
		}
	}
	for _, k := range p.Leases {
		if old, ok := m.kinds[k.Kind]; ok || k.Kind == 0 || k.Ended == nil {
			return djinn.Errorf(djinn.Internal, "state part %s: lease kind %d (%s): taken by %q, zero, or without an end handler", p.Name, k.Kind, k.Name, old.Name)
		}
	}
	for i, n := range cmds {
		m.commands[n] = p.Commands[i]
		m.ops[opType(n)] = p.Commands[i]
	}
	for i, n := range recs {
		m.records[n] = p.Records[i]
	}
	for _, k := range p.Leases {
		m.kinds[k.Kind] = k
		if k.Quota != "" {
			m.Leases.SetQuota(k.Kind, k.Quota)
		}
	}
	m.parts = append(m.parts, p)
	return nil
}

// fieldsOf returns the field numbers, in oneof of, of the messages that xs
// handle.
func fieldsOf[X any](part, what string, of protoreflect.OneofDescriptor, xs []X, msg func(X) protoreflect.MessageDescriptor) ([]protoreflect.FieldNumber, error) {
	out := make([]protoreflect.FieldNumber, len(xs))
	for i, x := range xs {
		fd := fieldFor(of, msg(x))
		if fd == nil {
			return nil, djinn.Errorf(djinn.Internal, "state part %s: %s is no %s", part, msg(x).FullName(), what)
		}
		out[i] = fd.Number()
	}
	return out, nil
}

// fieldFor returns the field of oneof of that holds a msg, or nil.
func fieldFor(of protoreflect.OneofDescriptor, msg protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	fs := of.Fields()
	for i := range fs.Len() {
		if f := fs.Get(i); f.Message() != nil && f.Message().FullName() == msg.FullName() {
			return f
		}
	}
	return nil
}

// Unhandled names the command ops and record kinds that no part handles.
// A server runs only a machine with none: a command without a handler
// would fail only when the log first holds one.
func (m *Machine) Unhandled() []string {
	var out []string
	for _, c := range []struct {
		of      protoreflect.OneofDescriptor
		handled func(protoreflect.FieldNumber) bool
	}{
		{opField, func(n protoreflect.FieldNumber) bool { _, ok := m.commands[n]; return ok }},
		{recordField, func(n protoreflect.FieldNumber) bool { _, ok := m.records[n]; return ok }},
	} {
		fs := c.of.Fields()
		for i := range fs.Len() {
			if f := fs.Get(i); !c.handled(f.Number()) {
				out = append(out, string(f.Message().FullName()))
			}
		}
	}
	return out
}

// ServiceID returns the cluster's service id (zero before Init applies).
func (m *Machine) ServiceID() djinn.ID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.service
}

// ServiceIDKnown is closed once the machine first has a service id.
func (m *Machine) ServiceIDKnown() <-chan struct{} { return m.known }

// PreviousIDs returns the service ids of the clusters this one was
// restored from, newest first.
func (m *Machine) PreviousIDs() []djinn.ID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.previous)
}

// MemberInfo is what the log records of a member: where it serves gRPC,
// whether it is to vote (a non-voter that is to vote is promoted by the
// leader once it has caught up), and the highest rules version its binary
// supports (0: not yet known).
type MemberInfo struct {
	Endpoint string
	Voter    bool
	RulesMax uint32
}

// Endpoint returns a member's gRPC address.
func (m *Machine) Endpoint(node string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.members[node].Endpoint
}

// Member returns what the log records of a member.
func (m *Machine) Member(node string) (MemberInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	info, ok := m.members[node]
	return info, ok
}

// MemberIDs returns the node ids the log has member records of.
func (m *Machine) MemberIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.members))
	for id := range m.members {
		ids = append(ids, id)
	}
	return ids
}

// Apply implements replica.StateMachine: it hands the command's op to the
// part that handles its type. A machine that stopped (rules.go) applies
// nothing more and answers every entry with why.
func (m *Machine) Apply(index uint64, cmd *statepb.Command) any {
	if err := m.refusal.Load(); err != nil {
		return err
	}
	m.applying = index
	if c, ok := m.ops[reflect.TypeOf(cmd.Op)]; ok {
		if op := reflect.ValueOf(cmd.Op); !op.IsNil() {
			return c.apply(cmd.GetNowUnixNanos(), op.Elem().Field(0).Interface().(proto.Message))
		}
	}
	return djinn.Errorf(djinn.Internal, "log entry %d: unknown command %T", index, cmd.Op)
}

// opType is the Go type of a Command's op when the op is field n: the
// generated wrapper of the oneof field, whose one field is the message.
// Apply finds a command's handler by it, and takes the message out of it,
// with no protobuf reflection on the apply path.
func opType(n protoreflect.FieldNumber) reflect.Type {
	c := &statepb.Command{}
	r := c.ProtoReflect()
	f := opField.Fields().ByNumber(n)
	r.Set(f, r.NewField(f))
	return reflect.TypeOf(c.Op)
}

// leasesEnded hands each ended lease to the part that owns its kind.
// Leases of a kind no part registered have no resource to remove.
func (m *Machine) leasesEnded(owners []lease.Owner) {
	for _, o := range owners {
		if k, ok := m.kinds[o.Kind]; ok {
			k.Ended(o)
		}
	}
}

// View implements replica's view-taking state machine: it takes every
// part's view (or, for a part without one, gathers its records) now, in
// one moment between applies, and returns the function that writes them
// later while applies go on, and the one that lets the views go — after
// the write, or instead of it. The write streams record by record: a
// snapshot of the lease table and the mailbox is never held in memory.
func (m *Machine) View() (write func(io.Writer) error, release func(), err error) {
	if err := m.refusal.Load(); err != nil {
		// Its state is not the log's through the applied index.
		return nil, nil, fmt.Errorf("no snapshot: %w", err)
	}
	s := &snapshot{}
	for _, p := range m.parts {
		switch {
		case p.View != nil:
			d, rel := p.View()
			s.dumps, s.releases = append(s.dumps, d), append(s.releases, rel)
		case p.Snapshot != nil:
			d, err := p.Snapshot()
			if err != nil {
				s.release()
				return nil, nil, fmt.Errorf("snapshot of %s: %w", p.Name, err)
			}
			s.dumps = append(s.dumps, d)
		}
	}
	return s.write, s.release, nil
}

// Snapshot implements replica.StateMachine: it takes the machine's view
// now (View) and returns the function that writes it, once, and lets it
// go. A snapshot that is never written holds its views: write it.
func (m *Machine) Snapshot() (func(io.Writer) error, error) {
	write, release, err := m.View()
	if err != nil {
		return nil, err
	}
	return func(w io.Writer) error {
		defer release()
		return write(w)
	}, nil
}

// snapshot is the machine's views, taken together.
type snapshot struct {
	dumps    []Dump
	releases []func()

	mu       sync.Mutex
	released bool // guarded by mu
}

// write writes every part's records, length-delimited, in the parts'
// order. It fails once the views are let go.
func (s *snapshot) write(w io.Writer) error {
	s.mu.Lock()
	released := s.released
	s.mu.Unlock()
	if released {
		return djinn.Errorf(djinn.Internal, "snapshot written after it was let go")
	}
	rw := newRecordWriter(w)
	for _, d := range s.dumps {
		if err := d(rw.write); err != nil {
			return fmt.Errorf("write snapshot: %w", err)
		}
	}
	return rw.flush()
}

// release lets the views go; a second call does nothing.
func (s *snapshot) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	for _, r := range s.releases {
		r()
	}
	s.dumps = nil
}

// recordWriter writes snapshot records, each as the Record kind that
// holds it, length-delimited (protodelim's framing), through one buffer
// it reuses: a record costs no allocation of its own.
type recordWriter struct {
	w   *bufio.Writer
	buf []byte
	// fields caches the Record field that holds each record message.
	fields map[protoreflect.FullName]protowire.Number
}

func newRecordWriter(w io.Writer) *recordWriter {
	return &recordWriter{w: bufio.NewWriterSize(w, 1<<16), buf: make([]byte, 0, 1<<12), fields: map[protoreflect.FullName]protowire.Number{}}
}

// write writes msg as the Record kind that holds it: the bytes
// proto.Marshal gives for a Record whose oneof holds msg, after their
// length.
func (rw *recordWriter) write(msg proto.Message) error {
	d := msg.ProtoReflect().Descriptor()
	num, ok := rw.fields[d.FullName()]
	if !ok {
		f := fieldFor(recordField, d)
		if f == nil {
			return djinn.Errorf(djinn.Internal, "%s is no snapshot record", d.FullName())
		}
		num = f.Number()
		rw.fields[d.FullName()] = num
	}
	// The message goes at the buffer's end, leaving room for the framing
	// before it: two lengths and a tag, at most 25 bytes.
	const room = 3 * binary.MaxVarintLen64
	body, err := proto.MarshalOptions{}.MarshalAppend(rw.buf[:room], msg)
	if err != nil {
		return err
	}
	rw.buf = body
	inner := len(body) - room
	var head [room]byte
	h := protowire.AppendTag(head[:0], num, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(inner))
	outer := len(h) + inner
	var fr [binary.MaxVarintLen64]byte
	frame := protowire.AppendVarint(fr[:0], uint64(outer))
	start := room - len(h) - len(frame)
	copy(body[start:], frame)
	copy(body[start+len(frame):], h)
	_, err = rw.w.Write(body[start:])
	return err
}

func (rw *recordWriter) flush() error { return rw.w.Flush() }

// maxRecord bounds one snapshot record, so a corrupt length cannot make
// Restore allocate without limit.
const maxRecord = 64 << 20

// Restore implements replica.StateMachine: it empties every part and
// hands each record to the part that restores its kind.
func (m *Machine) Restore(r io.Reader) error {
	if err := m.refusal.Load(); err != nil {
		return err
	}
	for _, p := range m.parts {
		p.Reset()
	}
	br := bufio.NewReaderSize(r, 1<<16)
	opts := protodelim.UnmarshalOptions{MaxSize: maxRecord}
	for n := 0; ; n++ {
		var rec statepb.Record
		if err := opts.UnmarshalFrom(br, &rec); err != nil {
			if errors.Is(err, io.EOF) {
				return m.restored(n)
			}
			return fmt.Errorf("snapshot record %d: %w", n, err)
		}
		if err := m.restore(&rec); err != nil {
			return fmt.Errorf("snapshot record %d: %w", n, err)
		}
	}
}

// restored tells the parts that the snapshot's n records are all read.
func (m *Machine) restored(n int) error {
	for _, p := range m.parts {
		if p.Restored == nil {
			continue
		}
		if err := p.Restored(); err != nil {
			return fmt.Errorf("snapshot ends after record %d: %s: %w", n, p.Name, err)
		}
	}
	return nil
}

func (m *Machine) restore(rec *statepb.Record) error {
	r := rec.ProtoReflect()
	if f := r.WhichOneof(recordField); f != nil {
		if h, ok := m.records[f.Number()]; ok {
			return h.restore(r.Get(f).Message().Interface())
		}
	}
	return djinn.Errorf(djinn.Internal, "unknown record %T", rec.Record)
}

// LeaseKindName returns the name its owner gave lease kind k ("kind N"
// for one no part declared).
func (m *Machine) LeaseKindName(k lease.Kind) string {
	if lk, ok := m.kinds[k]; ok {
		return lk.Name
	}
	return fmt.Sprintf("kind %d", k)
}
