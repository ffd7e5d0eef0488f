package client

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/pingtest"
	"github.com/djinn-go/djinn/internal/testproxy"
)

// deadPathKeepalive pings after gRPC's least interval (gRPC raises any
// shorter one to it, so these tests take about that long) and gives up
// on the answer at once.
const deadPathKeepalive, deadPathTimeout = MinKeepaliveTime, 500 * time.Millisecond

// A connection whose path dies silently (the network drops the bytes and
// sends no reset: a cut, a host powered off) is found by keepalive and
// closed, well before TCP would give up (a quarter of an hour): a call in
// flight on it fails as Unavailable (indefinite, so retried), an idle one
// leaves READY, and both connect again once the path is back. Without
// keepalive each row would wait out the test's deadline. The proxy
// swallows what the dialler sends (its calls and pings) and keeps the
// connection open.
func TestDeadPathFoundByKeepalive(t *testing.T) {
	rows := []struct {
		name string
		conn func(p *Pool, endpoint string) (*grpc.ClientConn, error)
		call bool // a call in flight when the path dies
	}{
		{"endpoint connection, a call in flight", (*Pool).Conn, true},
		{"endpoint connection, idle", (*Pool).Conn, false},
		{"cluster connection, idle", func(p *Pool, endpoint string) (*grpc.ClientConn, error) {
			cl, err := p.follow([]string{endpoint}, true)
			if err != nil {
				return nil, err
			}
			return cl.cc, nil
		}, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			l := startListener(t, rec.notify)
			p := testproxy.New(t, l.Addr())
			ref := l.Ref()
			ref.Endpoint = p.Addr()
			pool := NewPool(WithKeepalive(deadPathKeepalive, deadPathTimeout))
			t.Cleanup(func() { pool.Close() })
			cc, err := r.conn(pool, ref.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			awaitReady(t, cc)

			p.Set(testproxy.Swallow) // the path dies
			if r.call {
				err := Notify(t.Context(), pool, ref, testEvent(1, "lost"))
				if status.Code(err) != codes.Unavailable || !errors.Is(err, djinn.ErrUnavailable) || !strings.Contains(err.Error(), "keepalive") {
					t.Fatalf("notify on a dead path: %v, want Unavailable naming the keepalive", err)
				}
			}
			awaitNotReady(t, cc)

			p.Heal() // the path is back
			awaitReady(t, cc)
			if err := Notify(t.Context(), pool, ref, testEvent(2, "after")); err != nil {
				t.Fatalf("notify once the path is back: %v", err)
			}
		})
	}
}

// A listener accepts the pings of a sender's keepalive, idle or not, at
// the least interval it allows, and sends GOAWAY ("too_many_pings") to a
// sender pinging more often. Its interval here is short, so that the test
// does not wait out the default.
func TestListenAcceptsKeepalivePings(t *testing.T) {
	const minTime = 50 * time.Millisecond
	rows := []struct {
		name       string
		every      time.Duration
		wantGoAway string
	}{
		{"pings at the least interval allowed, no call in flight", minTime, ""},
		{"pings back to back", 0, "too_many_pings"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			var rec recorder
			l := startListener(t, rec.notify, WithKeepaliveMinTime(minTime))
			const n = 6 // a server strikes the third ping too many
			res, err := pingtest.Ping(l.Addr(), nil, n, r.every, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if res.GoAway != r.wantGoAway {
				t.Fatalf("GOAWAY %q after %d acknowledged pings, want %q", res.GoAway, res.Acked, r.wantGoAway)
			}
			if r.wantGoAway == "" && res.Acked != n {
				t.Errorf("%d of %d pings acknowledged", res.Acked, n)
			}
		})
	}
}
