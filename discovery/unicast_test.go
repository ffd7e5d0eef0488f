package discovery

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	wire "github.com/djinn-go/djinn/internal/discovery"
)

func TestUnicastDiscoveryAnswersInDjinnFormat(t *testing.T) {
	id := djinn.NewID()
	r := startRegistrar(t, RegistrarConfig{
		ServiceID: id, Groups: []string{"b", "", "a", "b"}, Endpoint: "10.1.2.3:9090", DisableMulticast: true,
	})
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	info, err := Unicast(ctx, r.Locator())
	if err != nil {
		t.Fatal(err)
	}
	want := RegistrarInfo{ServiceID: id, Groups: []string{"", "a", "b"}, Endpoint: "10.1.2.3:9090", Locator: r.Locator()}
	if !info.sameAs(want) || !slices.Equal(info.Groups, want.Groups) {
		t.Fatalf("Unicast = %+v, want %+v", info, want)
	}
	if got := r.Locator(); got.Host != "127.0.0.1" || got.Port != r.Addr().(*net.TCPAddr).Port {
		t.Errorf("locator %v: want the listener's 127.0.0.1 and port", got)
	}
	waitFor(t, &r.stats, "one served", func(s RegistrarStats) bool { return s.UnicastServed == 1 })

	if err := r.SetGroups([]string{"c"}); err != nil {
		t.Fatal(err)
	}
	if info, err = Unicast(ctx, r.Locator()); err != nil || !slices.Equal(info.Groups, []string{"c"}) {
		t.Fatalf("after SetGroups: Unicast = %+v, %v; want groups [c]", info, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.SetGroups([]string{"d"}); !errors.Is(err, ErrClosed) {
		t.Errorf("SetGroups after Close = %v, want ErrClosed", err)
	}
	if _, err := Unicast(ctx, r.Locator()); !errors.Is(err, djinn.ErrUnavailable) {
		t.Errorf("Unicast of a closed registrar = %v, want unavailable", err)
	}
}

func TestUnicastAdvertisedLocator(t *testing.T) {
	r := startRegistrar(t, RegistrarConfig{DisableMulticast: true, Locator: Locator{Host: "lookup.example.com"}})
	want := Locator{Host: "lookup.example.com", Port: r.Addr().(*net.TCPAddr).Port}
	if r.Locator() != want {
		t.Fatalf("locator %v, want %v", r.Locator(), want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	loc, _ := NewLocator("127.0.0.1", want.Port)
	info, err := Unicast(ctx, loc)
	if err != nil || info.Locator != want {
		t.Fatalf("Unicast = %+v, %v; want locator %v", info, err, want)
	}
}

// A registrar listening on every address advertises an address of an
// interface other than loopback.
func TestUnicastWildcardListenerAdvertisesAnInterfaceAddress(t *testing.T) {
	r := startRegistrar(t, RegistrarConfig{DisableMulticast: true, ListenAddr: "0.0.0.0:0"})
	if h := r.Locator().Host; h != "10.77.0.1" && h != "10.77.0.2" {
		t.Fatalf("locator %v: want the address of dv0 or dv1", r.Locator())
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if _, err := Unicast(ctx, r.Locator()); err != nil {
		t.Fatal(err)
	}
}

func TestEventStrings(t *testing.T) {
	info := RegistrarInfo{ServiceID: djinn.ID{1}, Groups: []string{"g"}, Endpoint: "h:1", Locator: Locator{Host: "h", Port: 4160}}
	for _, tc := range []struct {
		e    Event
		want string
	}{
		{Event{Kind: Discovered, Registrar: info}, `discovered 01000000000000000000000000000000 at jini://h:4160/ "h:1" groups ["g"]`},
		{Event{Kind: Discarded, Registrar: info, Reason: Left}, `discarded 01000000000000000000000000000000 at jini://h:4160/ "h:1" groups ["g"]: left`},
		{Event{Kind: Changed, Registrar: info}, `changed 01000000000000000000000000000000 at jini://h:4160/ "h:1" groups ["g"]`},
	} {
		if got := tc.e.String(); got != tc.want {
			t.Errorf("String = %s, want %s", got, tc.want)
		}
	}
	for _, r := range []Reason{ByUser, NoInterest, Unreachable, Left, Removed, 99} {
		if r.String() == "" {
			t.Errorf("Reason %d has no text", int(r))
		}
	}
	if EventKind(9).String() != "EventKind(9)" {
		t.Errorf("unknown kind: %s", EventKind(9))
	}
}

// A Java client proposes only Java formats, and gets the protocol's
// null-format answer: version 2, format 0, nothing after.
func TestUnicastJavaClientGetsNoFormat(t *testing.T) {
	r := startRegistrar(t, RegistrarConfig{DisableMulticast: true, Groups: []string{"g"}})
	conn := dial(t, r)
	kerberos := wire.FormatIDOf("net.jini.discovery.kerberos")
	if err := wire.WriteUnicastRequest(conn, []wire.FormatID{wire.PlaintextFormat, kerberos}); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("answer % x, want % x and the connection closed", got, want)
	}
	waitFor(t, &r.stats, "a no-format answer", func(s RegistrarStats) bool { return s.UnicastNoFormat == 1 })
}

func dial(t *testing.T, r *Registrar) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", r.Addr().String(), patience)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(patience)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// Bad input is counted by kind and ends the connection with no answer.
func TestUnicastBadInputIsCountedAndClosed(t *testing.T) {
	request := func(count uint16, ids ...uint64) []byte {
		b := binary.BigEndian.AppendUint32(nil, 2)
		b = binary.BigEndian.AppendUint16(b, count)
		for _, id := range ids {
			b = binary.BigEndian.AppendUint64(b, id)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		input []byte
		count func(RegistrarStats) uint64
	}{
		{"DJ.2.6.6 version 1 request", []byte{0, 0, 0, 1}, func(s RegistrarStats) uint64 { return s.UnicastUnsupported }},
		{"not discovery at all", []byte("GET / HTTP/1.1\r\n\r\n"), func(s RegistrarStats) uint64 { return s.UnicastUnsupported }},
		{"DJ.2.6.6 null format proposed", request(1, 0), func(s RegistrarStats) uint64 { return s.UnicastMalformed }},
		{"truncated format list", request(3, uint64(wire.GRPCFormat)), func(s RegistrarStats) uint64 { return s.UnicastMalformed }},
		{"truncated header", []byte{0, 0}, func(s RegistrarStats) uint64 { return s.UnicastMalformed }},
		{"65535 formats: over MaxRequestSize", request(65535, 1, 2, 3), func(s RegistrarStats) uint64 { return s.UnicastTooLarge }},
		{"silent client: deadline", nil, func(s RegistrarStats) uint64 { return s.UnicastFailed }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startRegistrar(t, RegistrarConfig{DisableMulticast: true, Timeout: 100 * time.Millisecond})
			conn := dial(t, r)
			if _, err := conn.Write(tc.input); err != nil {
				t.Fatal(err)
			}
			if tc.input != nil {
				// The whole input is sent; what is left unsent is EOF.
				conn.(*net.TCPConn).CloseWrite()
			}
			got, err := io.ReadAll(conn)
			if err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				t.Fatalf("reading the answer: %v", err)
			}
			if len(got) != 0 {
				t.Fatalf("answer % x, want none", got)
			}
			s := waitFor(t, &r.stats, "the connection counted", func(s RegistrarStats) bool { return tc.count(s) == 1 })
			if s.UnicastServed+s.UnicastNoFormat != 0 {
				t.Errorf("stats %+v: something was answered", s)
			}
		})
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// Connections over MaxConnections are closed unread; a freed slot serves
// again.
func TestUnicastConnectionLimit(t *testing.T) {
	r := startRegistrar(t, RegistrarConfig{DisableMulticast: true, MaxConnections: 1})
	hold := dial(t, r) // takes the only slot, says nothing
	extra := dial(t, r)
	if got, _ := io.ReadAll(extra); len(got) != 0 {
		t.Fatalf("connection over the limit got % x", got)
	}
	waitFor(t, &r.stats, "a rejection", func(s RegistrarStats) bool { return s.UnicastRejected == 1 })
	hold.Close()
	waitFor(t, &r.stats, "the held connection to end", func(s RegistrarStats) bool { return s.UnicastMalformed == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if _, err := Unicast(ctx, r.Locator()); err != nil {
		t.Fatalf("Unicast after the slot was freed: %v", err)
	}
}

// The client side: a Java lookup service answers with the null format, a
// closed port is unavailable, garbage is malformed, and a huge answer is
// refused unread.
func TestUnicastClientErrors(t *testing.T) {
	serve := func(t *testing.T, answer []byte) Locator {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		t.Cleanup(func() { ln.Close(); <-done })
		go func() {
			defer close(done)
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(patience))
			if _, err := wire.ReadUnicastRequest(conn, 0); err == nil {
				conn.Write(answer)
			}
		}()
		loc, _ := NewLocator("127.0.0.1", ln.Addr().(*net.TCPAddr).Port)
		return loc
	}
	header := func(f wire.FormatID) []byte {
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(nil, 2), uint64(f))
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for _, tc := range []struct {
		name   string
		answer []byte
		want   error
	}{
		{"java lookup service", header(wire.NullFormat), ErrNoFormat},
		{"format not proposed", header(wire.PlaintextFormat), ErrFormat},
		{"version 1", []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}, ErrVersion},
		{"truncated", header(wire.GRPCFormat), ErrMalformed},
		{"too large", append(header(wire.GRPCFormat), 0x7f, 0xff, 0xff, 0xff), ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Unicast(ctx, serve(t, tc.answer)); !errors.Is(err, tc.want) {
				t.Fatalf("Unicast = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("closed port", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		loc, _ := NewLocator("127.0.0.1", ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		if _, err := Unicast(ctx, loc); !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("Unicast = %v, want unavailable", err)
		}
	})
}

func TestRegistrarConfigErrors(t *testing.T) {
	good := func() RegistrarConfig {
		return RegistrarConfig{ServiceID: djinn.NewID(), Endpoint: "127.0.0.1:1", ListenAddr: "127.0.0.1:0", DisableMulticast: true}
	}
	for _, tc := range []struct {
		name   string
		change func(*RegistrarConfig)
	}{
		{"zero service id", func(c *RegistrarConfig) { c.ServiceID = djinn.ID{} }},
		{"endpoint without port", func(c *RegistrarConfig) { c.Endpoint = "host" }},
		{"no endpoint", func(c *RegistrarConfig) { c.Endpoint = "" }},
		{"group not utf-8", func(c *RegistrarConfig) { c.Groups = []string{"\xff"} }},
		{"group too long for a packet", func(c *RegistrarConfig) { c.Groups = []string{string(make1k())} }},
		{"ttl 256", func(c *RegistrarConfig) { c.TTL = 256 }},
		{"negative timeout", func(c *RegistrarConfig) { c.Timeout = -time.Second }},
		{"unknown interface", func(c *RegistrarConfig) { c.DisableMulticast = false; c.Interfaces = []string{"nosuch0"} }},
		{"bad advertised host", func(c *RegistrarConfig) { c.Locator = Locator{Host: "under_score"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good()
			tc.change(&cfg)
			r, err := NewRegistrar(cfg)
			if err == nil {
				r.Close()
				t.Fatal("NewRegistrar succeeded")
			}
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("NewRegistrar = %v, want invalid argument", err)
			}
		})
	}
}

func make1k() []byte { return bytes.Repeat([]byte("g"), 1024) }

// TestUnicastRefusesIncompleteLocator: a locator without a host or with a
// port out of range is the caller's mistake, named as such, not a
// registrar that could not be reached.
func TestUnicastRefusesIncompleteLocator(t *testing.T) {
	for _, loc := range []Locator{{}, {Host: "127.0.0.1"}, {Port: DefaultPort}, {Host: "127.0.0.1", Port: 70000}, {Host: "127.0.0.1", Port: -1}} {
		_, err := Unicast(context.Background(), loc)
		if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), loc.String()) {
			t.Errorf("Unicast(%#v): %v, want invalid argument naming the locator", loc, err)
		}
	}
}

// TestListenAddressKinds: a malformed address to listen on is an invalid
// argument naming it; an address in use is Unavailable.
func TestListenAddressKinds(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		addr string
		kind error
	}{
		{"nope", djinn.ErrInvalidArgument},
		{"127.0.0.1:99999", djinn.ErrInvalidArgument},
		{taken.Addr().String(), djinn.ErrUnavailable},
	} {
		r, err := NewRegistrar(RegistrarConfig{ServiceID: djinn.NewID(), Endpoint: "127.0.0.1:1", ListenAddr: tc.addr, DisableMulticast: true})
		if err == nil {
			r.Close()
		}
		if !errors.Is(err, tc.kind) || !strings.Contains(fmt.Sprint(err), tc.addr) {
			t.Errorf("NewRegistrar with ListenAddr %q: %v, want kind %s naming it", tc.addr, err, tc.kind)
		}
		d, err := NewLookupDiscovery(LookupDiscoveryConfig{ResponseAddr: tc.addr, Requests: -1})
		if err == nil {
			d.Close()
		}
		if !errors.Is(err, tc.kind) || !strings.Contains(fmt.Sprint(err), tc.addr) {
			t.Errorf("NewLookupDiscovery with ResponseAddr %q: %v, want kind %s naming it", tc.addr, err, tc.kind)
		}
	}
}
