package server

import (
	"context"
	"errors"
	"io"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/backoff"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// LookupID is the object id of the lookup service (the registrar).
var LookupID = djinn.ID{'l', 'o', 'o', 'k', 'u', 'p'}

// LookupConfig tunes the lookup service and its discovery.
type LookupConfig struct {
	Enabled bool `toml:"enabled"`
	// Groups are the registrar's member groups ("" is the public group).
	Groups []string `toml:"groups"`
	// Discovery is the unicast discovery address ("" turns discovery off).
	Discovery string `toml:"discovery"`
	// Multicast turns on multicast announcements and answers to multicast
	// requests, on Interfaces (all multicast-capable ones when empty).
	Multicast  bool     `toml:"multicast"`
	Interfaces []string `toml:"interfaces"`
	// Announce is the announcement interval.
	Announce Duration `toml:"announce"`
	MaxItems int      `toml:"max-items"`
}

func (c *LookupConfig) check() error {
	// The groups go out in discovery's answers and in every RegistrarInfo:
	// text a multicast packet can carry, as every group djinn takes.
	if _, err := lds.CheckGroups("lookup groups", c.Groups, math.MaxInt); err != nil {
		return err
	}
	if c.Discovery != "" {
		if err := djinn.CheckListenAddress(c.Discovery); err != nil {
			return djinn.Errorf(djinn.InvalidArgument, "lookup discovery: %v (\"\" turns discovery off)", err)
		}
	}
	// The registrar and the lookup discovery service's discovery take
	// the interval as given: past Check, one not positive would be
	// refused at start by discovery alone, logged and retried for good
	// (the lookup service never announced, the lookup discovery service
	// discovering nothing), not refused naming this key.
	if a := time.Duration(c.Announce); a <= 0 || a == djinn.Forever {
		return djinn.Errorf(djinn.InvalidArgument, "lookup announce %s: must be a positive duration (the interval between the lookup service's multicast announcements; 2m by default)", djinn.FormatDuration(a))
	}
	return positive("lookup max-items", c.MaxItems)
}

// lookupPart is the lookup service (the registrar) and its discovery
// (discover). Registering and looking up are any authenticated
// caller's; a registration's lease cookie is the capability to change its
// attributes.
func lookupPart(s *Server) *part {
	c := s.cfg.Lookup
	rpc := &lookupRPC{s: s}
	p := &part{
		name:    "lookup",
		enabled: c.Enabled,
		state: func(m *state.Machine) error {
			rpc.st = lookup.NewState(m.Leases, m.ServiceID, service.Limits{})
			return m.Add(rpc.st.Part())
		},
		open: func() (err error) {
			rpc.svc, err = lookup.NewService(rpc.st, s.lessor, s.node, s.now, s.ref(LookupID), lookup.Config{
				MaxItems: c.MaxItems,
				Delivery: event.Config{Sender: client.NewEventSender(s.pool), MaxBatch: 64},
				Logger:   s.log,
			})
			return err
		},
		serve: func(r *registrar) error {
			attrs := func(op int32) Rule {
				return checking(leaseOwner(s, (*djinnpb.AttributesRequest).GetLeaseCookie, func(djinn.ID) error {
					return djinn.Errorf(djinn.UnknownLease, "registration: its lease ended")
				}), func(req *djinnpb.AttributesRequest) error {
					return rpc.st.CheckAttributes(op, req.GetEntries(), req.GetTemplates())
				})
			}
			return r.serve(lookupDesc(rpc), rpc, Rules{
				"Register": authenticated, "Lookup": authenticated, "LookupStream": authenticated, "Notify": authenticated,
				// Modifying a registration is its owner's; its lease's
				// cookie alone lets another principal renew it, no more.
				"AddAttributes": attrs(lookup.OpAdd), "ModifyAttributes": attrs(lookup.OpModify), "SetAttributes": attrs(lookup.OpSet),
				"GetEntryTypes": authenticated, "GetFieldValues": authenticated, "GetServiceTypes": authenticated,
				"GetRegistrar": authenticated,
			})
		},
		ref:        s.ref(LookupID),
		metrics:    func() []prometheus.Collector { return lookupMetrics(rpc.st, rpc.svc) },
		list:       map[string]lister{"lookup-items": func(f map[string]string) ([]*djinnpb.Resource, error) { return s.listLookupItems(rpc.st)(f) }},
		listFilter: map[string]string{"lookup-items": "type"},
		page: &page{title: "Lookup", actions: drop(s), view: func(ctx context.Context, q url.Values) (any, error) {
			return s.lookupView(ctx, rpc.st, rpc.svc, q)
		}},
		status: func(resp *djinnpb.StatusResponse) {
			items, watches := rpc.st.Len()
			resp.Counts["lookup_items"], resp.Counts["lookup_watches"] = int64(items), int64(watches)
			if c.Enabled {
				resp.Lookup = refProto(s.ref(LookupID)())
			}
		},
		close: func() { rpc.svc.Close() },
	}
	if c.Discovery != "" && c.Multicast {
		p.run = s.discover // the leader's alone; without multicast every member's (Server.New)
	}
	return p
}

func lookupMetrics(st *lookup.State, svc *lookup.Service) []prometheus.Collector {
	return []prometheus.Collector{
		gauge("djinn_lookup_items", "Service items registered.", func() float64 { n, _ := st.Len(); return float64(n) }),
		gauge("djinn_lookup_watches", "Service event registrations (notify).", func() float64 { _, n := st.Len(); return float64(n) }),
		counter("djinn_lookup_lookups_total", "Lookups served by this node.", func() float64 { return float64(svc.Lookups.Load()) }),
		counter("djinn_lookup_registrations_total", "Registrations made through this node as leader.", func() float64 { return float64(svc.Registered.Load()) }),
		counter("djinn_lookup_delivered_events_total", "Service events delivered to listeners.", func() float64 { return float64(svc.DeliveryStats().Delivered) }),
		counter("djinn_lookup_delivery_failed_events_total", "Service events dropped by a definite failure.", func() float64 { return float64(svc.DeliveryStats().Failed) }),
	}
}

// lookupRPC serves the LookupService.
type lookupRPC struct {
	djinnpb.UnimplementedLookupServiceServer
	s   *Server
	st  *lookup.State
	svc *lookup.Service
}

func (r *lookupRPC) Register(ctx context.Context, req *djinnpb.RegisterRequest) (*djinnpb.ServiceRegistration, error) {
	reg, err := r.svc.Register(ctx, req.GetItem(), time.Duration(req.GetLeaseDurationNanos()))
	if err != nil {
		return nil, err
	}
	return &djinnpb.ServiceRegistration{ServiceId: reg.ID[:], Lease: reg.Lease}, nil
}

// lookupDesc is the lookup service's description. Lookup is answered by
// lookupEncoded rather than the generated method: the description is the
// generated one with that method's handler replaced, so that the answer
// can carry the items' wire form (EncodedLookupResponse, the same bytes as
// a LookupResponse) without building a message per item, entry and field.
func lookupDesc(r *lookupRPC) *grpc.ServiceDesc {
	desc := djinnpb.LookupService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	i := slices.IndexFunc(desc.Methods, func(m grpc.MethodDesc) bool { return m.MethodName == "Lookup" })
	if i < 0 {
		panic("server: the lookup service has no Lookup method to answer")
	}
	desc.Methods[i].Handler = r.lookupEncoded
	return &desc
}

// lookupEncoded is the Lookup method's handler (grpc.MethodDesc.Handler).
func (r *lookupRPC) lookupEncoded(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	req := new(djinnpb.LookupRequest)
	if err := dec(req); err != nil {
		return nil, err
	}
	h := func(ctx context.Context, req any) (any, error) {
		may, err := r.s.mayRead(ctx, "lookup service")
		if err != nil {
			return nil, err
		}
		total, items, err := r.lookup(req.(*djinnpb.LookupRequest), may)
		if err != nil {
			return nil, err
		}
		return &djinnpb.EncodedLookupResponse{Total: total, Items: items}, nil
	}
	if interceptor == nil {
		return h(ctx, req)
	}
	return interceptor(ctx, req, &grpc.UnaryServerInfo{Server: r, FullMethod: djinnpb.LookupService_Lookup_FullMethodName}, h)
}

// Lookup is not called: lookupEncoded answers the method.
func (r *lookupRPC) Lookup(context.Context, *djinnpb.LookupRequest) (*djinnpb.LookupResponse, error) {
	return nil, djinn.Errorf(djinn.Internal, "lookup: not registered through lookupDesc")
}

// lookup answers req, Lookup's and LookupStream's. An answer is at most
// lookup.MaxAnswer, what a client receives by default less room around
// it: a larger one is refused ResourceExhausted, naming its size and how
// many matches fit, before its items are encoded.
func (r *lookupRPC) lookup(req *djinnpb.LookupRequest, may lookup.MayRead) (int64, [][]byte, error) {
	if req.GetMaxMatches() < 0 {
		return 0, nil, djinn.Errorf(djinn.InvalidArgument, "max matches %d: must not be negative", req.GetMaxMatches())
	}
	total, items, err := r.svc.Lookup(req.GetTemplate(), int(req.GetMaxMatches()), req.GetOne(), may)
	return int64(total), items, err
}

// LookupStream bounds.
const (
	// maxLookupBatch is the most lookups one LookupBatch may carry.
	maxLookupBatch = 1024
	// lookupMessageBytes bounds a LookupStream response: it carries the
	// next answers of its batch while they fit. It is the largest answer
	// (lookup.MaxAnswer), so a batch whose answers a client could receive
	// in one response before answers were split still gets one response:
	// a client that reads one response per batch reads it as before.
	lookupMessageBytes = lookup.MaxAnswer
)

// LookupStream answers each batch of lookups, in order, with one response
// or more: each carries the batch's next answers, at most
// lookupMessageBytes of them, so no message passes what a client receives
// by default and the server holds one message of answers at a time, not a
// batch's. An answer over lookup.MaxAnswer is
// refused ResourceExhausted, naming its size, as Lookup refuses it. A
// lookup that fails carries
// its error and the others and the stream go on, except when this node
// cannot answer (not the leader): the stream ends, so the client goes
// elsewhere; so does a batch over the limit. Responses are written as
// EncodedLookupBatchResponse, the same bytes as a LookupBatchResponse (see
// lookupDesc).
func (r *lookupRPC) LookupStream(stream djinnpb.LookupService_LookupStreamServer) error {
	may, err := r.s.mayRead(stream.Context(), "lookup service")
	if err != nil {
		return err
	}
	for {
		batch, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		lookups := batch.GetLookups()
		if len(lookups) > maxLookupBatch {
			return djinn.Errorf(djinn.InvalidArgument, "lookup batch of %d lookups: over the limit of %d", len(lookups), maxLookupBatch)
		}
		answers := make([]djinnpb.EncodedLookupAnswer, len(lookups))
		ptrs := make([]*djinnpb.EncodedLookupAnswer, len(lookups))
		first, size := 0, 0 // the next message's first answer, and its bytes so far
		for i, req := range lookups {
			a := &answers[i]
			a.Total, a.Items, err = r.lookup(req, may)
			if err != nil {
				if djinn.KindOf(err) == djinn.Unavailable {
					return err
				}
				a.Error = grpcerr.ToProto(err)
			}
			n := answerSize(a)
			if i > first && size+n > lookupMessageBytes {
				if err := stream.SendMsg(&djinnpb.EncodedLookupBatchResponse{Answers: ptrs[first:i]}); err != nil {
					return err
				}
				first, size = i, 0
			}
			ptrs[i] = a
			size += n
		}
		// The last answers (none, for an empty batch).
		if err := stream.SendMsg(&djinnpb.EncodedLookupBatchResponse{Answers: ptrs[first:]}); err != nil {
			return err
		}
	}
}

// answerSize is the bytes answer a takes in a response.
func answerSize(a *djinnpb.EncodedLookupAnswer) int {
	return wire.FieldSize(1, a)
}

func (r *lookupRPC) Notify(ctx context.Context, req *djinnpb.LookupNotifyRequest) (*djinnpb.EventRegistration, error) {
	n, err := r.svc.Notify(ctx, req.GetTemplate(), req.GetTransitions(), req.GetListener(), req.GetHandback(), time.Duration(req.GetLeaseDurationNanos()))
	if err != nil {
		return nil, err
	}
	return &djinnpb.EventRegistration{EventId: n.EventID, Source: refProto(r.s.ref(LookupID)()), Lease: n.Lease, Sequence: n.Seq}, nil
}

func (r *lookupRPC) attributes(ctx context.Context, req *djinnpb.AttributesRequest, op int32) (*djinnpb.AttributesResponse, error) {
	if err := r.svc.Attributes(ctx, req.GetLeaseCookie(), op, req.GetEntries(), req.GetTemplates()); err != nil {
		return nil, err
	}
	return &djinnpb.AttributesResponse{}, nil
}

func (r *lookupRPC) AddAttributes(ctx context.Context, req *djinnpb.AttributesRequest) (*djinnpb.AttributesResponse, error) {
	return r.attributes(ctx, req, lookup.OpAdd)
}

func (r *lookupRPC) ModifyAttributes(ctx context.Context, req *djinnpb.AttributesRequest) (*djinnpb.AttributesResponse, error) {
	return r.attributes(ctx, req, lookup.OpModify)
}

func (r *lookupRPC) SetAttributes(ctx context.Context, req *djinnpb.AttributesRequest) (*djinnpb.AttributesResponse, error) {
	return r.attributes(ctx, req, lookup.OpSet)
}

func (r *lookupRPC) GetEntryTypes(ctx context.Context, req *djinnpb.BrowseRequest) (*djinnpb.EntryTypesResponse, error) {
	tmpl, err := wire.TemplateFrom(req.GetTemplate())
	if err != nil {
		return nil, err
	}
	may, err := r.s.mayRead(ctx, "lookup service")
	if err != nil {
		return nil, err
	}
	resp := &djinnpb.EntryTypesResponse{}
	err = r.svc.Browse(may, func(reg *lookup.Registry) error {
		ts, err := reg.EntryTypes(tmpl)
		if err != nil {
			return err
		}
		var b browseAnswer
		for _, t := range ts {
			if e := (&djinnpb.Entry{Type: t.Type, Supertypes: t.Supertypes}); b.fits(proto.Size(e)) {
				resp.Types = append(resp.Types, e)
			}
		}
		return b.check("entry types")
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// browseAnswer bounds a browsing answer (GetEntryTypes, GetFieldValues,
// GetServiceTypes) as a lookup's is bounded, at lookup.MaxAnswer: what a
// client receives by default, less room around it. Its elements are
// counted as they are made; past the bound they are counted, not kept.
type browseAnswer struct {
	n, size int
}

// fits counts an element of size bytes (a repeated field 1's), and
// reports whether the answer still fits.
func (b *browseAnswer) fits(size int) bool {
	b.n++
	b.size += protowire.SizeTag(1) + protowire.SizeBytes(size)
	return b.size <= lookup.MaxAnswer
}

// check refuses an answer that does not fit, naming what it holds.
func (b *browseAnswer) check(what string) error {
	if b.size <= lookup.MaxAnswer {
		return nil
	}
	return djinn.Errorf(djinn.ResourceExhausted, "%s: %d of them take %d bytes, past the %d an answer holds (what a client receives by default less room around it); narrow the template", what, b.n, b.size, lookup.MaxAnswer)
}

func (r *lookupRPC) GetFieldValues(ctx context.Context, req *djinnpb.BrowseRequest) (*djinnpb.FieldValuesResponse, error) {
	tmpl, err := wire.TemplateFrom(req.GetTemplate())
	if err != nil {
		return nil, err
	}
	may, err := r.s.mayRead(ctx, "lookup service")
	if err != nil {
		return nil, err
	}
	resp := &djinnpb.FieldValuesResponse{}
	err = r.svc.Browse(may, func(reg *lookup.Registry) error {
		vs, err := reg.FieldValues(tmpl, int(req.GetSetIndex()), req.GetField())
		if err != nil {
			return err
		}
		var b browseAnswer
		for _, v := range vs {
			pv := wire.Value(v)
			if pv == nil {
				pv = &djinnpb.Value{}
			}
			if b.fits(proto.Size(pv)) {
				resp.Values = append(resp.Values, pv)
			}
		}
		return b.check("field values")
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (r *lookupRPC) GetServiceTypes(ctx context.Context, req *djinnpb.BrowseRequest) (*djinnpb.ServiceTypesResponse, error) {
	tmpl, err := wire.TemplateFrom(req.GetTemplate())
	if err != nil {
		return nil, err
	}
	may, err := r.s.mayRead(ctx, "lookup service")
	if err != nil {
		return nil, err
	}
	resp := &djinnpb.ServiceTypesResponse{}
	err = r.svc.Browse(may, func(reg *lookup.Registry) error {
		ts, err := reg.ServiceTypes(tmpl, req.GetPrefix())
		if err != nil {
			return err
		}
		var b browseAnswer
		for _, t := range ts {
			b.fits(len(t))
		}
		resp.Types = ts
		return b.check("service types")
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (r *lookupRPC) GetRegistrar(ctx context.Context, _ *djinnpb.GetRegistrarRequest) (*djinnpb.RegistrarInfo, error) {
	svc := r.s.machine.ServiceID()
	items, _ := r.st.Len()
	info := &djinnpb.RegistrarInfo{ServiceId: svc[:], Groups: r.s.cfg.Lookup.Groups, Registrar: refProto(r.s.ref(LookupID)()), Items: int64(items)}
	r.s.mu.Lock()
	if r.s.registrar != nil {
		info.Locator = r.s.registrar.Locator().String()
	}
	r.s.mu.Unlock()
	return info, nil
}

// discover runs this node's registrar until ctx ends. Without multicast it
// runs for the node's whole life, on every member: each answers unicast
// discovery (DJ.2.6) with the cluster's lookup service id and its own gRPC
// endpoint — a client sent to a follower follows the follower's leader
// hint — so a locator naming any member finds the lookup service whichever
// member leads. With multicast (announcements and answers to multicast
// requests, DJ.2.4 and DJ.2.5) it runs for the leader's term only: the
// announcements are a side effect, one announcer per cluster, and the
// locator an announcement names must be the one that answers for the
// lookup service — a discoverer takes another locator answering with the
// same id for a contradiction — so the leader alone answers there too,
// and its final empty-groups announcement when its term ends has
// discoverers drop it and find the next leader.
//
// It starts once the node knows the cluster's service id; a node
// discovering for its whole life is ready (Server.ready) once it has tried.
// A registrar that cannot start (its port taken, an interface not there
// yet) is tried again, backing off to a minute; meanwhile the lookup
// service is reachable by its gRPC address.
func (s *Server) discover(ctx context.Context) {
	select {
	case <-s.machine.ServiceIDKnown(): // a new cluster's first leader gives it one
	case <-ctx.Done():
		return
	}
	var r *discovery.Registrar
	for b := backoff.New(100*time.Millisecond, time.Minute); ; {
		var err error
		r, err = discovery.NewRegistrar(discovery.RegistrarConfig{
			ServiceID: s.machine.ServiceID(), Groups: s.cfg.Lookup.Groups, Endpoint: s.advertise,
			ListenAddr: s.cfg.Lookup.Discovery, DisableMulticast: !s.cfg.Lookup.Multicast, Interfaces: s.cfg.Lookup.Interfaces,
			AnnouncementInterval: time.Duration(s.cfg.Lookup.Announce), Logger: s.log.With("part", "discovery"),
		})
		if err == nil {
			break
		}
		s.discoveryTried.Store(true) // ready without it: a port taken may stay so
		s.log.Error("discovery: cannot start; the lookup service is reachable only by its gRPC address until it does", "err", err, "retry within", b.Next())
		if !b.Wait(ctx) {
			return
		}
	}
	s.mu.Lock()
	s.registrar = r
	s.mu.Unlock()
	s.discoveryTried.Store(true) // after: a ready node tells its locator
	s.log.Info("discovery: serving", "locator", r.Locator().String(), "groups", s.cfg.Lookup.Groups, "multicast", s.cfg.Lookup.Multicast)
	<-ctx.Done()
	s.mu.Lock()
	s.registrar = nil
	s.mu.Unlock()
	if err := r.Close(); err != nil {
		s.log.Warn("discovery: closing", "err", err)
	}
}

// lookupView is the console's lookup page, a service browser: the items
// matching a template made of the search terms (a service type, an
// attribute as Type.field=value, a service id), as any principal's lookup
// finds them — another principal's without its lease, principal and
// expiry — and the watches the reader sees (sees).
func (s *Server) lookupView(ctx context.Context, st *lookup.State, svc *lookup.Service, q url.Values) (any, error) {
	type item struct {
		ID        string   `json:"id"`
		Lease     string   `json:"lease"`
		Principal string   `json:"principal"`
		Types     []string `json:"types"`
		Entries   []string `json:"entries"`
		Service   string   `json:"service"`
		Expires   *int64   `json:"expires"`
		Others    bool     `json:"others,omitempty"` // another principal's: its lease not shown
	}
	type watch struct {
		ID          string `json:"id"`
		Template    string `json:"template"`
		Transitions string `json:"transitions"`
		EventID     int64  `json:"eventId"`
		Seq         int64  `json:"seq"`
		Listener    string `json:"listener"`
		Expires     *int64 `json:"expires"`
	}
	tmpl, err := browseTemplate(q)
	if err != nil {
		return nil, err
	}
	total, items, err := st.Lookup(tmpl, maxListed)
	if err != nil {
		return nil, err
	}
	v := struct {
		Now     int64   `json:"now"`
		Total   int     `json:"total"`
		Lookups uint64  `json:"lookups"`
		Items   []item  `json:"items"`
		Watches []watch `json:"watches"`
	}{Now: s.nowMs(), Total: total, Lookups: svc.Lookups.Load(), Items: []item{}, Watches: []watch{}}
	for _, it := range items {
		row := item{ID: it.ID.String(), Types: it.Types, Entries: []string{}, Service: string(it.Service)}
		// Any lookup finds the item; its lease, and whose it is, are
		// its principal's (and the operator's) to see.
		if c, ok := st.Cookie(it.ID); ok {
			if p := s.principalOf(c); sees(ctx, p) {
				row.Lease, row.Principal, row.Expires = fingerprint(c), p, s.expiresMs(c)
			} else {
				row.Others = true
			}
		}
		for _, e := range it.Entries {
			row.Entries = append(row.Entries, entryString(e.Type, e.Fields))
		}
		v.Items = append(v.Items, row)
	}
	for _, w := range st.Watches() {
		if !sees(ctx, s.principalOf(w.ID)) {
			continue
		}
		wv := watch{ID: fingerprint(w.ID), Template: templateString(w.Template), Transitions: w.Transitions.String(),
			EventID: w.EventID, Seq: w.Seq, Expires: s.expiresMs(w.ID)}
		if l := w.Listener; l != nil {
			obj, _ := djinn.IDFromBytes("listener", l.GetObjectId())
			wv.Listener = refString(l.GetEndpoint(), obj)
		}
		v.Watches = append(v.Watches, wv)
	}
	return v, nil
}

// browseTemplate makes the template of the lookup page's search: type
// (a service type), attr (Type.field=value, a string value; Type alone
// for any entry of that type) and id (a service id).
func browseTemplate(q url.Values) (service.Template, error) {
	var t service.Template
	if typ := strings.TrimSpace(q.Get("type")); typ != "" {
		t.Types = []string{typ}
	}
	if attr := strings.TrimSpace(q.Get("attr")); attr != "" {
		path, value, hasValue := strings.Cut(attr, "=")
		typ, field, hasField := strings.Cut(path, ".")
		if typ == "" || hasField != hasValue || hasField && field == "" {
			return t, djinn.Errorf(djinn.InvalidArgument, "attribute %q: want Type.field=value, or Type alone", attr)
		}
		et := service.EntryTemplate{Type: typ}
		if hasField {
			et.Fields = []service.Field{{Name: field, Value: service.NewString(value)}}
		}
		t.Entries = []service.EntryTemplate{et}
	}
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		sid, err := djinn.ParseID(id)
		if err != nil {
			return t, djinn.Errorf(djinn.InvalidArgument, "service id %q: %v", id, err)
		}
		t.ID = &sid
	}
	return t, nil
}

func entryString(typ string, fields []service.Field) string {
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		parts = append(parts, f.Name+"="+f.Value.String())
	}
	return typ + "{" + strings.Join(parts, ", ") + "}"
}

func templateString(t service.Template) string {
	var parts []string
	if t.ID != nil {
		parts = append(parts, "id "+t.ID.String())
	}
	if len(t.Types) > 0 {
		parts = append(parts, "types "+strings.Join(t.Types, ", "))
	}
	for _, e := range t.Entries {
		parts = append(parts, entryString(e.Type, e.Fields))
	}
	if len(parts) == 0 {
		return "any service"
	}
	return strings.Join(parts, "; ")
}

// listLookupItems lists the lookup service's registrations (not its own
// item, which has no lease), named by service id; filter "type" keeps
// those of a service type.
func (s *Server) listLookupItems(st *lookup.State) lister {
	return func(filter map[string]string) ([]*djinnpb.Resource, error) {
		var tmpl service.Template
		if t, ok := filter["type"]; ok {
			tmpl.Types = []string{t}
		}
		_, items, err := st.Lookup(tmpl, math.MaxInt32)
		if err != nil {
			return nil, err
		}
		var out []*djinnpb.Resource
		for _, it := range items {
			c, ok := st.Cookie(it.ID)
			if !ok {
				continue
			}
			// A reference is any bytes; a detail is text (a proto
			// string, which does not marshal unless UTF-8).
			d := map[string]string{"types": strings.Join(it.Types, ","), "service": strings.ToValidUTF8(string(it.Service), "\uFFFD")}
			if res, ok := s.leaseResource(it.ID.String(), c, d); ok {
				out = append(out, res)
			}
		}
		return out, nil
	}
}
