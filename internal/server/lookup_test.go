package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
	"google.golang.org/protobuf/proto"
)

func str(s string) *djinnpb.Value {
	return &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: s}}
}

func printer(id []byte, model string) *djinnpb.ServiceItem {
	return &djinnpb.ServiceItem{ServiceId: id, Service: []byte("127.0.0.1:9"), Types: []string{"Printer", "Device"},
		Entries: []*djinnpb.Entry{{Type: "Name", Fields: []*djinnpb.Field{{Name: "name", Value: str(model)}}},
			{Type: "Location", Supertypes: []string{"Place"}, Fields: []*djinnpb.Field{{Name: "floor", Value: str("3")}}}}}
}

// TestLookupService: register, look up by id, type, entry and supertype
// (DESIGN.md 6), watch with remote events whose sequence numbers rise, change
// attributes, end a registration's lease — and find the registrar by
// unicast discovery.
func TestLookupService(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Lookup.Discovery = l.Addr().String()
	cfg.LookupJoin.Enabled = false // the registry holds the test's items and the registrar's own
	l.Close()
	srv := servertest.Start(t, cfg)
	c := servertest.Dial(t, srv.Addr())
	conn, err := c.Conn(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ls := djinnpb.NewLookupServiceClient(conn)
	ctx := testContext(t)

	type got struct {
		seq int64
		ev  *djinnpb.ServiceEvent
	}
	events := make(chan got, 16)
	lis, err := client.Listen(ctx, "127.0.0.1:0", func(_ context.Context, ev *client.RemoteEvent) error {
		var se djinnpb.ServiceEvent
		if err := ev.Payload.UnmarshalTo(&se); err != nil {
			return err
		}
		events <- got{ev.Seq, &se}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	reg, err := ls.Notify(ctx, &djinnpb.LookupNotifyRequest{Template: &djinnpb.ServiceTemplate{Types: []string{"Printer"}},
		Transitions: 7, Listener: client.RefToProto(lis.Ref()), LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if reg.GetEventId() == 0 || reg.GetLease() == nil {
		t.Fatalf("notify: %v", reg)
	}
	next := func(want djinnpb.Transition) got {
		t.Helper()
		select {
		case g := <-events:
			if g.ev.GetTransition() != want {
				t.Fatalf("service event %v, want %v", g.ev, want)
			}
			return g
		case <-time.After(servertest.Timeout):
			t.Fatalf("no %v event", want)
			return got{}
		}
	}

	a, err := ls.Register(ctx, &djinnpb.RegisterRequest{Item: printer(nil, "laser"), LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.GetServiceId()) != 16 {
		t.Fatalf("an item without a service id got %x, want one assigned", a.GetServiceId())
	}
	e1 := next(djinnpb.Transition_TRANSITION_NOMATCH_MATCH)
	if _, err := ls.Register(ctx, &djinnpb.RegisterRequest{Item: &djinnpb.ServiceItem{Service: []byte("127.0.0.1:8"), Types: []string{"Scanner"}}, LeaseDurationNanos: int64(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tmpl *djinnpb.ServiceTemplate
		want int64
	}{
		{"everything: the two and the registrar's own item", &djinnpb.ServiceTemplate{}, 3},
		{"by id", &djinnpb.ServiceTemplate{ServiceId: a.GetServiceId()}, 1},
		{"by inherited type", &djinnpb.ServiceTemplate{Types: []string{"Device"}}, 1},
		{"by entry field", &djinnpb.ServiceTemplate{Entries: []*djinnpb.EntryTemplate{{Type: "Name", Fields: []*djinnpb.Field{{Name: "name", Value: str("laser")}}}}}, 1},
		{"by entry supertype, wildcard field", &djinnpb.ServiceTemplate{Entries: []*djinnpb.EntryTemplate{{Type: "Place", Fields: []*djinnpb.Field{{Name: "floor"}}}}}, 1},
		{"a field that differs", &djinnpb.ServiceTemplate{Entries: []*djinnpb.EntryTemplate{{Type: "Name", Fields: []*djinnpb.Field{{Name: "name", Value: str("inkjet")}}}}}, 0},
	} {
		resp, err := ls.Lookup(ctx, &djinnpb.LookupRequest{Template: tc.tmpl, MaxMatches: 10})
		if err != nil || resp.GetTotal() != tc.want || int64(len(resp.GetItems())) != tc.want {
			t.Errorf("%s: %v %v, want %d", tc.name, resp, err, tc.want)
		}
	}
	// The registrar registers itself (DESIGN.md 6): its service id, its
	// reference, the registrar's types; registering that id is refused.
	self, err := ls.GetRegistrar(ctx, &djinnpb.GetRegistrarRequest{})
	if err != nil {
		t.Fatal(err)
	}
	own, err := ls.Lookup(ctx, &djinnpb.LookupRequest{Template: &djinnpb.ServiceTemplate{Types: []string{"net.jini.core.lookup.ServiceRegistrar"}}, MaxMatches: 10})
	if err != nil || own.GetTotal() != 1 || string(own.GetItems()[0].GetServiceId()) != string(self.GetServiceId()) ||
		string(own.GetItems()[0].GetService()) != refString(self.GetRegistrar()) {
		t.Errorf("the registrar's own item: %v %v; registrar %v", own, err, self)
	}
	if _, err := ls.Register(ctx, &djinnpb.RegisterRequest{Item: &djinnpb.ServiceItem{ServiceId: self.GetServiceId(), Types: []string{"X"}}, LeaseDurationNanos: int64(time.Minute)}); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("registering the registrar's own id: %v, want InvalidArgument", err)
	}
	if _, err := ls.Lookup(ctx, &djinnpb.LookupRequest{MaxMatches: -1}); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("negative max: %v, want InvalidArgument", err)
	}
	one, err := ls.Lookup(ctx, &djinnpb.LookupRequest{Template: &djinnpb.ServiceTemplate{Types: []string{"Printer"}}, One: true})
	if err != nil || len(one.GetItems()) != 1 || string(one.GetItems()[0].GetServiceId()) != string(a.GetServiceId()) {
		t.Fatalf("lookup one: %v %v", one, err)
	}
	// Lookups answer with the stored items' wire form (registerLookup): it
	// decodes as the item registered (types sorted, as stored), and the
	// replaced handler still runs through the server's interceptors.
	want := printer(a.GetServiceId(), "laser")
	want.Types = []string{"Device", "Printer"}
	if !proto.Equal(one.GetItems()[0], want) {
		t.Errorf("looked-up item %v, want %v", one.GetItems()[0], want)
	}
	if m := served(t, srv, "LookupService", "Lookup"); !strings.Contains(m, "OK ") || !strings.Contains(m, "InvalidArgument ") {
		t.Errorf("Lookup calls counted %q, want OK and InvalidArgument ones", m)
	}
	// Attributes change through the registration's lease cookie: the item
	// still matches, a MATCH_MATCH event.
	_, err = ls.ModifyAttributes(ctx, &djinnpb.AttributesRequest{LeaseCookie: a.GetLease().GetCookie(),
		Templates: []*djinnpb.EntryTemplate{{Type: "Name"}},
		Entries:   []*djinnpb.Entry{{Type: "Name", Fields: []*djinnpb.Field{{Name: "name", Value: str("color laser")}}}}})
	if err != nil {
		t.Fatal(err)
	}
	e2 := next(djinnpb.Transition_TRANSITION_MATCH_MATCH)
	if e2.seq <= e1.seq || e2.ev.GetItem().GetEntries()[0].GetFields()[0].GetValue().GetStringValue() != "color laser" {
		t.Fatalf("MATCH_MATCH event %v (seq %d after %d)", e2.ev, e2.seq, e1.seq)
	}
	types, err := ls.GetServiceTypes(ctx, &djinnpb.BrowseRequest{Template: &djinnpb.ServiceTemplate{}, Prefix: "P"})
	if err != nil || len(types.GetTypes()) != 1 || types.GetTypes()[0] != "Printer" {
		t.Fatalf("service types with prefix P: %v %v", types, err)
	}
	// The registration's lease ends: MATCH_NOMATCH, the item gone.
	lease, err := client.LeaseFromProto(a.GetLease(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Cancel(ctx, c); err != nil {
		t.Fatal(err)
	}
	e3 := next(djinnpb.Transition_TRANSITION_MATCH_NOMATCH)
	if e3.seq <= e2.seq || e3.ev.GetItem() != nil || string(e3.ev.GetServiceId()) != string(a.GetServiceId()) {
		t.Fatalf("MATCH_NOMATCH event %v", e3.ev)
	}
	if _, err := ls.AddAttributes(ctx, &djinnpb.AttributesRequest{LeaseCookie: a.GetLease().GetCookie()}); !errors.Is(err, djinn.ErrUnknownLease) {
		t.Fatalf("attributes of an ended registration: %v, want UnknownLease", err)
	}
	// Bad notify arguments.
	for _, tr := range []uint32{0, 8} {
		_, err := ls.Notify(ctx, &djinnpb.LookupNotifyRequest{Transitions: tr, Listener: client.RefToProto(lis.Ref()), LeaseDurationNanos: int64(time.Minute)})
		if !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("transitions %d: %v, want InvalidArgument", tr, err)
		}
	}

	// Unicast discovery finds the registrar, with its gRPC endpoint.
	loc, err := discovery.ParseLocator("jini://" + cfg.Lookup.Discovery)
	if err != nil {
		t.Fatal(err)
	}
	var info discovery.RegistrarInfo
	servertest.Eventually(t, "unicast discovery answers", func() bool {
		info, err = discovery.Unicast(ctx, loc)
		return err == nil
	})
	st, err := servertest.Status(djinnpb.NewAdminClient(conn))
	if err != nil {
		t.Fatal(err)
	}
	if info.Endpoint != srv.Addr() || string(info.ServiceID[:]) != string(st.GetServiceId()) || len(info.Groups) != 1 || info.Groups[0] != "" {
		t.Fatalf("discovered %+v, want the server's endpoint %s, service id and the public group", info, srv.Addr())
	}
}

// TestDiscoveryPortTaken: a registrar whose discovery port is taken when
// its node starts is tried again until the port is free; the node is ready
// meanwhile, and the lookup service answers by its gRPC address with no
// locator.
func TestDiscoveryPortTaken(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cfg := servertest.Config(t)
	cfg.Lookup.Discovery = held.Addr().String()
	srv := servertest.Start(t, cfg)
	c := servertest.Dial(t, srv.Addr())
	ctx := testContext(t)
	r, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Locator != "" {
		t.Fatalf("locator %q while the discovery port is held by another listener, want none", info.Locator)
	}
	want, err := discovery.ParseLocator("jini://" + cfg.Lookup.Discovery)
	if err != nil {
		t.Fatal(err)
	}
	held.Close()
	servertest.Eventually(t, "the registrar to start once its port is free", func() bool {
		info, err := r.Info(ctx)
		if err != nil || info.Locator == "" {
			return false
		}
		loc, err := discovery.ParseLocator(info.Locator)
		return err == nil && loc == want
	})
	found, err := discovery.Unicast(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	if found.Endpoint != srv.Addr() {
		t.Errorf("unicast discovery answered endpoint %s, want %s", found.Endpoint, srv.Addr())
	}
}

// refString is the string form of a wire reference.
func refString(pb *djinnpb.Ref) string {
	r, err := wire.RefFrom("ref", pb)
	if err != nil {
		return err.Error()
	}
	return r.String()
}

// TestLookupStream: lookups over one stream answer as Lookup does, in
// order; a lookup the service refuses carries its error and the stream
// goes on (DESIGN.md 6: a negative max is an invalid argument); a closed
// stream refuses further lookups.
func TestLookupStream(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	ctx := t.Context()
	reg, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []djinn.ID
	for _, model := range []string{"laser", "inkjet", "plotter"} {
		r, err := reg.Register(ctx, service.Item{Service: []byte("127.0.0.1:9"), Types: []string{"Printer"},
			Entries: []service.Entry{{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString(model)}}}}}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}

	// The wire: one response per batch of small answers, an answer per
	// lookup in order, errors in band.
	raw, err := djinnpb.NewLookupServiceClient(c.ClientConn()).LookupStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	batch := &djinnpb.LookupBatch{Lookups: []*djinnpb.LookupRequest{
		{Template: &djinnpb.ServiceTemplate{Types: []string{"Printer"}}, MaxMatches: 10},
		{Template: &djinnpb.ServiceTemplate{Types: []string{"Printer"}}, MaxMatches: -1},
		{Template: &djinnpb.ServiceTemplate{ServiceId: ids[1][:]}, One: true},
		{Template: &djinnpb.ServiceTemplate{Types: []string{"Scanner"}}, MaxMatches: 10},
	}}
	want := []struct {
		total, items int64
		err          djinn.Kind
	}{{3, 3, ""}, {0, 0, djinn.InvalidArgument}, {1, 1, ""}, {0, 0, ""}}
	for _, b := range []*djinnpb.LookupBatch{batch, {}, batch} {
		if err := raw.Send(b); err != nil {
			t.Fatal(err)
		}
		resp, err := raw.Recv()
		if err != nil {
			t.Fatalf("batch of %d: %v", len(b.GetLookups()), err)
		}
		if len(resp.GetAnswers()) != len(b.GetLookups()) {
			t.Fatalf("batch of %d answered with %d", len(b.GetLookups()), len(resp.GetAnswers()))
		}
		for i, a := range resp.GetAnswers() {
			gotKind := djinn.Kind("")
			if e := a.GetError(); e != nil {
				gotKind = djinn.KindOf(grpcerr.FromProto(e))
			}
			if w := want[i]; a.GetTotal() != w.total || int64(len(a.GetItems())) != w.items || gotKind != w.err {
				t.Errorf("answer %d: total %d, %d items, error %v; want %d, %d, %q", i, a.GetTotal(), len(a.GetItems()), a.GetError(), w.total, w.items, w.err)
			}
		}
	}
	// A batch over the limit ends the stream, naming its size.
	big := &djinnpb.LookupBatch{Lookups: make([]*djinnpb.LookupRequest, 1025)}
	for i := range big.Lookups {
		big.Lookups[i] = &djinnpb.LookupRequest{}
	}
	if err := raw.Send(big); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Recv(); !errors.Is(grpcerr.FromStatus(err), djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "1025") {
		t.Errorf("a batch of 1025 lookups: %v, want invalid argument naming 1025", err)
	}

	// The client.
	s, err := reg.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	it, err := s.Lookup(ctx, service.Template{Entries: []service.EntryTemplate{{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString("plotter")}}}}})
	if err != nil || it == nil || it.ID != ids[2] {
		t.Errorf("stream lookup of plotter: %+v %v", it, err)
	}
	if it, err := s.Lookup(ctx, service.Template{Types: []string{"Scanner"}}); it != nil || err != nil {
		t.Errorf("stream lookup of nothing: %+v %v, want nil, nil", it, err)
	}
	total, items, err := s.LookupN(ctx, service.Template{Types: []string{"Printer"}}, 2)
	if err != nil || total != 3 || len(items) != 2 {
		t.Errorf("stream LookupN: %d %d %v, want 3 and 2 items", total, len(items), err)
	}
	if _, _, err := s.LookupN(ctx, service.Template{}, -1); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("stream LookupN -1: %v, want invalid argument", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(ctx, service.Template{}); err == nil {
		t.Error("lookup on a closed stream succeeded")
	}

	// The server goes away: the stream's lookups fail, and keep failing.
	s, err = reg.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(ctx, service.Template{}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Lookup(ctx, service.Template{}); err == nil {
			t.Error("lookup on a stream to a stopped server succeeded")
		}
	}
	_ = s.Close()
}

// TestLookupStreamLargeAnswers (DESIGN.md 6; quotas on everything that
// holds memory): a batch whose answers together pass what a client
// receives by default (4 MiB) is answered in several responses of at most
// 4 MiB less 64 KiB each, in the batch's order; an answer a client could
// not receive is refused in band, naming its size, and the stream goes
// on. Before, a batch was answered by one response however large: the
// client's stream failed RESOURCE_EXHAUSTED and its lookups with it. A
// batch that fits one response still gets one, so a client that reads a
// response per batch reads it as it did.
func TestLookupStreamLargeAnswers(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	ctx := testContext(t)
	reg, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Items as large as the default limits allow (about 80 KiB): 60 of
	// them are 4.7 MB.
	const items = 60
	register(t, c, items)
	big := &djinnpb.ServiceTemplate{Types: []string{"Big"}}
	raw, err := djinnpb.NewLookupServiceClient(c.ClientConn()).LookupStream(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// 30 lookups of one item each (2.4 MB): one response, as before
	// answers were split.
	fits := &djinnpb.LookupBatch{}
	for range 30 {
		fits.Lookups = append(fits.Lookups, &djinnpb.LookupRequest{Template: big, One: true})
	}
	if answers, responses := sendBatch(t, raw, fits); len(answers) != 30 || responses != 1 {
		t.Errorf("a batch of 30 answers of 80 KiB: %d answers in %d responses, want 30 in one", len(answers), responses)
	}

	// 100 lookups of one item each (7.9 MB in all), one of 20 items (1.6
	// MB), one of every item (4.7 MB, refused), one that finds nothing.
	batch := &djinnpb.LookupBatch{Lookups: []*djinnpb.LookupRequest{{Template: big, MaxMatches: 20}}}
	for range 100 {
		batch.Lookups = append(batch.Lookups, &djinnpb.LookupRequest{Template: big, One: true})
	}
	batch.Lookups = append(batch.Lookups, &djinnpb.LookupRequest{Template: big, MaxMatches: items},
		&djinnpb.LookupRequest{Template: &djinnpb.ServiceTemplate{Types: []string{"Scanner"}}, MaxMatches: 10})
	answers, responses := sendBatch(t, raw, batch)
	if len(answers) != len(batch.GetLookups()) || responses < 3 {
		t.Errorf("%d answers in %d responses to a batch of %d lookups, want an answer each in 3 responses or more", len(answers), responses, len(batch.GetLookups()))
	}
	checkLargeAnswers(t, answers, items)
	largeAnswersThroughTheClient(t, reg, items)
}

// checkLargeAnswers checks the answers of TestLookupStreamLargeAnswers'
// second batch: 20 items, 100 of one, every item refused, none.
func checkLargeAnswers(t *testing.T, answers []*djinnpb.LookupAnswer, items int) {
	t.Helper()
	for i, a := range answers {
		want, wantItems := int64(items), 1
		switch i {
		case 0:
			wantItems = 20
		case 101:
			e := grpcerr.FromProto(a.GetError())
			if !errors.Is(e, djinn.ErrResourceExhausted) || !strings.Contains(e.Error(), fmt.Sprintf("bytes (%d items)", items)) || !strings.Contains(e.Error(), "at most 4128768") {
				t.Errorf("answer %d, of %d items of 80 KiB: %v, want resource exhausted naming its size and the limit", i, items, e)
			}
			continue
		case 102:
			want, wantItems = 0, 0
		}
		if a.GetError() != nil || a.GetTotal() != want || len(a.GetItems()) != wantItems {
			t.Errorf("answer %d: total %d, %d items, error %v; want %d and %d items", i, a.GetTotal(), len(a.GetItems()), a.GetError(), want, wantItems)
		}
	}
}

// sendBatch sends batch on raw and reads responses until every lookup of
// it is answered, checking that no response passes 4 MiB less 64 KiB.
func sendBatch(t *testing.T, raw djinnpb.LookupService_LookupStreamClient, batch *djinnpb.LookupBatch) (answers []*djinnpb.LookupAnswer, responses int) {
	t.Helper()
	if err := raw.Send(batch); err != nil {
		t.Fatal(err)
	}
	for len(answers) < len(batch.GetLookups()) {
		resp, err := raw.Recv()
		if err != nil {
			t.Fatalf("after %d answers in %d responses: %v", len(answers), responses, err)
		}
		responses++
		if n, size := len(resp.GetAnswers()), proto.Size(resp); n == 0 || size > 4<<20-64<<10 {
			t.Errorf("response %d: %d answers in %d bytes; want at least one, in at most 4 MiB less 64 KiB", responses, n, size)
		}
		answers = append(answers, resp.GetAnswers()...)
	}
	return answers, responses
}

// largeAnswersThroughTheClient: through the client, an answer too large
// fails its lookup alone; many large ones at once (batched as they wait)
// are each answered.
func largeAnswersThroughTheClient(t *testing.T, reg *client.Registrar, items int) {
	t.Helper()
	ctx := testContext(t)
	s, err := reg.Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.LookupN(ctx, service.Template{Types: []string{"Big"}}, items); !errors.Is(err, djinn.ErrResourceExhausted) || !strings.Contains(err.Error(), "ask for fewer matches") {
		t.Errorf("stream LookupN of %d items of 80 KiB: %v, want resource exhausted, saying what to do", items, err)
	}
	errs := make(chan error, 64)
	for range cap(errs) {
		go func() {
			total, got, err := s.LookupN(ctx, service.Template{Types: []string{"Big"}}, 10)
			if err == nil && (total != items || len(got) != 10) {
				err = fmt.Errorf("total %d, %d items; want %d and 10", total, len(got), items)
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Errorf("stream LookupN of 10 items of 80 KiB, 64 at once: %v", err)
		}
	}
}

// TestLookupLargeAnswer (DESIGN.md 7; quotas on everything that holds
// memory): a unary Lookup whose answer would pass what a client receives
// by default (4 MiB) is refused ResourceExhausted, as a LookupStream
// refuses it, naming its size, the limit and how many matches fit; a
// lookup for that many is answered, and still reports every match. On a
// session and on a call of its own alike. Before, the server encoded
// every item and the client failed with a receive error it could not act
// on (or a session's reply too large).
func TestLookupLargeAnswer(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	ctx := testContext(t)
	const items = 60
	register(t, servertest.Dial(t, srv.Addr()), items)
	big := service.Template{Types: []string{"Big"}}
	for _, c := range []struct {
		name string
		opts []client.Option
	}{{"session", nil}, {"unary", []client.Option{client.WithoutSession()}}} {
		t.Run(c.name, func(t *testing.T) {
			reg, err := servertest.Dial(t, srv.Addr(), c.opts...).Lookup(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = reg.LookupN(ctx, big, items)
			m := regexp.MustCompile(`ask for fewer matches: at most (\d+) `).FindStringSubmatch(fmt.Sprint(err))
			if !errors.Is(err, djinn.ErrResourceExhausted) || m == nil || !strings.Contains(err.Error(), fmt.Sprintf("bytes (%d items)", items)) || !strings.Contains(err.Error(), "at most 4128768") {
				t.Fatalf("LookupN of %d items of 80 KiB: %v; want resource exhausted naming its size, the limit and how many fit", items, err)
			}
			fit, _ := strconv.Atoi(m[1])
			if fit < 40 || fit >= items {
				t.Fatalf("%d of %d items of 80 KiB said to fit in 4 MiB", fit, items)
			}
			total, got, err := reg.LookupN(ctx, big, fit)
			if err != nil || total != items || len(got) != fit {
				t.Errorf("LookupN of the %d said to fit: total %d, %d items, %v; want %d and %d items", fit, total, len(got), err, items, fit)
			}
			if _, _, err := reg.LookupN(ctx, big, fit+1); !errors.Is(err, djinn.ErrResourceExhausted) {
				t.Errorf("LookupN of %d, one more than said to fit: %v; want resource exhausted", fit+1, err)
			}
			// The stream answers alike.
			s, err := reg.Stream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, _, serr := s.LookupN(ctx, big, items); serr == nil || !strings.Contains(serr.Error(), m[0]) {
				t.Errorf("stream LookupN of %d items of 80 KiB: %v; want the error Lookup gives, %q", items, serr, m[0])
			}
		})
	}
}

// register registers n items of 80 KiB of type Big, as large as the
// default limits allow.
func register(t *testing.T, c *client.Client, n int) {
	t.Helper()
	ctx := testContext(t)
	reg, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		blob := make([]byte, 63<<10)
		blob[0] = byte(i)
		_, err := reg.Register(ctx, service.Item{Service: make([]byte, 16<<10), Types: []string{"Big"},
			Entries: []service.Entry{{Type: "Blob", Fields: []service.Field{{Name: "b", Value: service.NewBytes(blob)}}}}}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestLookupBrowseLargeAnswer (DESIGN.md 7; quotas on everything that
// holds memory): a browsing answer that would pass what a client receives
// by default (4 MiB) is refused ResourceExhausted naming its size, the
// limit and what to do, as a lookup's is. Before, the server sent it and
// the client failed to receive it.
func TestLookupBrowseLargeAnswer(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	ctx := testContext(t)
	// 70 distinct values of 63 KiB: 4.5 MB.
	const items = 70
	register(t, c, items)
	reg, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	blobs := service.Template{Types: []string{"Big"}, Entries: []service.EntryTemplate{{Type: "Blob"}}}
	_, err = reg.FieldValues(ctx, blobs, 0, "b")
	if !errors.Is(err, djinn.ErrResourceExhausted) || !strings.Contains(err.Error(), fmt.Sprintf("field values: %d of them take", items)) ||
		!strings.Contains(err.Error(), "past the 4128768") || !strings.Contains(err.Error(), "narrow the template") {
		t.Errorf("FieldValues of %d values of 63 KiB: %v; want resource exhausted naming its size, the limit and what to do", items, err)
	}
	// A template that matches fewer is answered.
	got, err := reg.FieldValues(ctx, service.Template{Types: []string{"Big"}, Entries: []service.EntryTemplate{{Type: "Blob", Fields: []service.Field{{Name: "b", Value: service.NewBytes(append([]byte{3}, make([]byte, 63<<10-1)...))}}}}}, 0, "b")
	if err != nil || len(got) != 1 {
		t.Errorf("FieldValues of one value of 63 KiB: %d values, %v; want one", len(got), err)
	}
}
