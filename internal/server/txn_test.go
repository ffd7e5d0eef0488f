package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
)

// served returns the server's djinn_rpc_total lines for the named method.
func served(t *testing.T, srv *server.Server, method string) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: servertest.Timeout}
	resp, err := hc.Get("http://" + srv.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, "djinn_rpc_total{") && strings.Contains(l, `method="`+method+`"`) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "; ")
}

func kvClient(t *testing.T, c *client.Client, addr string) *kv.Client {
	t.Helper()
	conn, err := c.Conn(addr)
	if err != nil {
		t.Fatal(err)
	}
	return kv.NewClient(conn)
}

// transfer writes two keys on kvAddr's participant under a transaction of
// mgr's manager and commits it.
func transfer(t *testing.T, mgr *client.Client, kvc *kv.Client) {
	t.Helper()
	ctx := testContext(t)
	m, err := mgr.TransactionManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := m.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ptx := &participant.Tx{Manager: m.Ref(), ID: tx.ID()}
	for _, k := range []string{"a", "b"} {
		if err := kvc.Put(ctx, ptx, k, []byte("v-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		// The participant rolls forward in phase 2, which may still be on
		// its way after commit returned: a read outside the transaction
		// waits for the key's lock.
		servertest.Eventually(t, "committed "+k+" visible", func() bool {
			v, ok, err := kvc.Get(ctx, nil, k)
			return err == nil && ok && string(v) == "v-"+k
		})
	}
}

// TestTransactionOwnParticipantInProcess: the server's manager and its own
// key/value participant talk in process — no join or prepareAndCommit is
// served over gRPC — and give the same outcome as over the wire.
func TestTransactionOwnParticipantInProcess(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	transfer(t, c, kvClient(t, c, srv.Addr()))
	for _, m := range []string{"Join", "PrepareAndCommit", "Prepare", "Commit"} {
		got := served(t, srv, m)
		if m == "Commit" {
			if got != `djinn_rpc_total{code="OK",method="Commit"} 1` {
				t.Errorf("Commit served: %q, want the client's one call", got)
			}
			continue
		}
		if got != "" {
			t.Errorf("%s served over gRPC: %q, want none", m, got)
		}
	}
}

// TestTransactionOtherServersParticipant: a participant on another server
// joins and votes over gRPC.
func TestTransactionOtherServersParticipant(t *testing.T) {
	t.Parallel()
	mgrSrv := servertest.Start(t, servertest.Config(t))
	kvSrv := servertest.Start(t, servertest.Config(t))
	transfer(t, servertest.Dial(t, mgrSrv.Addr()), kvClient(t, servertest.Dial(t, kvSrv.Addr()), kvSrv.Addr()))
	if got := served(t, mgrSrv, "Join"); got != `djinn_rpc_total{code="OK",method="Join"} 1` {
		t.Errorf("manager served Join: %q, want one", got)
	}
	if got := served(t, kvSrv, "PrepareAndCommit"); got != `djinn_rpc_total{code="OK",method="PrepareAndCommit"} 1` {
		t.Errorf("participant served PrepareAndCommit: %q, want one", got)
	}
}
