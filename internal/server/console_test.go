package server_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// consoleGet reads a console view as JSON.
func consoleGet(t *testing.T, srv *server.Server, path string) (int, map[string]any) {
	t.Helper()
	code, raw := consoleRaw(t, srv, path)
	var v map[string]any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return code, v
}

// consoleRaw reads a console view as it comes.
func consoleRaw(t *testing.T, srv *server.Server, path string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: servertest.Timeout}
	resp, err := hc.Get("http://" + srv.AdminAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// consoleAct posts an action as the console's page does: confirmed, with
// the join secret when one is given.
func consoleAct(t *testing.T, srv *server.Server, page, action, target, secret string, confirmed bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+srv.AdminAddr()+"/api/action/"+page+"/"+action, strings.NewReader(url.Values{"target": {target}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if confirmed {
		req.Header.Set("Djinn-Confirm", "yes")
	}
	if secret != "" {
		req.Header.Set(server.OperatorHeader, secret)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: servertest.Timeout}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConsoleViews: every page's view lists what was made in its service,
// and shows no capability (lease cookies, registration ids) in the clear.
func TestConsoleViews(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	p := servertest.Populate(t, c, srv.Addr(), time.Minute)
	code, pages := consoleRaw(t, srv, "/api/pages")
	if code != http.StatusOK || strings.Count(pages, `"name"`) != 8 {
		t.Fatalf("/api/pages: %d %s, want the 8 pages", code, pages)
	}
	for _, tt := range []struct {
		page   string
		want   []string
		absent []string
	}{
		{"cluster", []string{`"state":"Leader"`, `"health":"healthy"`, srv.NodeID()}, nil},
		{"leases", []string{"mailbox registration", "renewal set", "transaction", "lock set", "lock owner", "lookup registration", "lookup discovery registration"},
			[]string{p.Mailbox.Lease.Cookie().String()}},
		{"mailbox", []string{`"state":"disabled`, `"stored":`}, []string{p.Mailbox.ID.String()}},
		{"renewal", []string{`"desired":`, `"landlord":`}, []string{p.Renewal.ID().String()}},
		{"txn", []string{fmt.Sprintf(`"id":"%d","state":"ACTIVE"`, p.Txn.ID()), `"vote":"not voted"`}, nil},
		{"lock", []string{`"w":1`, `"fence":1`}, []string{p.LockSet.ID().String()}},
		{"lookup", []string{p.Item.ID.String(), `Name{name=\"` + p.ItemName, `"transitions"`}, nil},
		{"lds", []string{p.LDSGroup}, nil},
	} {
		code, b := consoleRaw(t, srv, "/api/view/"+tt.page)
		if code != http.StatusOK {
			t.Errorf("%s: %d %s", tt.page, code, b)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s view lacks %s: %s", tt.page, w, b)
			}
		}
		for _, a := range tt.absent {
			if strings.Contains(string(b), a) {
				t.Errorf("%s view shows capability %s", tt.page, a)
			}
		}
	}
	code, v := consoleGet(t, srv, "/api/view/lookup?type=Nothing")
	if code != http.StatusOK || v["total"] != float64(0) {
		t.Errorf("lookup for type Nothing: %d %v, want no item", code, v["total"])
	}
	code, v = consoleGet(t, srv, "/api/view/lookup?attr=Name.name%3D"+p.ItemName)
	if code != http.StatusOK || v["total"] != float64(1) {
		t.Errorf("lookup by attribute: %d %v, want the item", code, v["total"])
	}
	if code, v := consoleGet(t, srv, "/api/view/lookup?attr=Name.=x"); code != http.StatusBadRequest {
		t.Errorf("a bad attribute: %d %v, want 400 naming it", code, v)
	}
	if code, _ := consoleGet(t, srv, "/api/view/nothing"); code != http.StatusNotFound {
		t.Errorf("an unknown page: %d, want 404", code)
	}
	checkClusterRules(t, srv)
}

// checkClusterRules: the cluster page shows the cluster's rules version
// and the highest this member's binary supports, as the admin Status has
// them, each member's supported maximum as the member list has it, and
// no reason to have stopped while the member applies the log.
func checkClusterRules(t *testing.T, srv *server.Server) {
	t.Helper()
	st, err := servertest.Status(djinnpb.NewAdminClient(servertest.Conn(t, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	code, v := consoleGet(t, srv, "/api/view/cluster")
	if code != http.StatusOK || st.GetRulesVersion() == 0 || v["rulesVersion"] != float64(st.GetRulesVersion()) || v["rulesMax"] != float64(st.GetRulesMax()) {
		t.Errorf("cluster view: %d rules %v up to %v; want the status's %d up to %d", code, v["rulesVersion"], v["rulesMax"], st.GetRulesVersion(), st.GetRulesMax())
	}
	if _, ok := v["stopped"]; ok {
		t.Errorf("cluster view of a member applying the log: stopped %q, want none", v["stopped"])
	}
	ms, _ := v["members"].([]any)
	if len(ms) != 1 {
		t.Fatalf("cluster view: members %v, want this one", v["members"])
	}
	if m, _ := ms[0].(map[string]any); m["rulesMax"] != float64(st.GetRulesMax()) {
		t.Errorf("cluster view's member: rules up to %v, want %d", m["rulesMax"], st.GetRulesMax())
	}
}

// TestConsoleActionsNeedTheOperator: an action is refused without the
// operator role or a confirmation, and done with both.
func TestConsoleActionsNeedTheOperator(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	p := servertest.Populate(t, c, srv.Addr(), time.Minute)
	id := fmt.Sprint(p.Txn.ID())
	if code, body := consoleAct(t, srv, "txn", "abort", id, "", true); code != http.StatusForbidden {
		t.Errorf("abort without the operator role: %d %s, want 403", code, body)
	}
	if code, body := consoleAct(t, srv, "txn", "abort", id, "wrong", true); code != http.StatusForbidden {
		t.Errorf("abort with a wrong secret: %d %s, want 403", code, body)
	}
	secret := servertest.Secret(t, srv)
	if code, body := consoleAct(t, srv, "txn", "abort", id, secret, false); code != http.StatusBadRequest {
		t.Errorf("abort unconfirmed: %d %s, want 400", code, body)
	}
	if code, body := consoleAct(t, srv, "txn", "explode", id, secret, true); code != http.StatusBadRequest {
		t.Errorf("an unknown action: %d %s, want 400", code, body)
	}
	if code, body := consoleAct(t, srv, "txn", "abort", id, secret, true); code != http.StatusOK {
		t.Fatalf("abort as operator: %d %s", code, body)
	}
	if _, b := consoleRaw(t, srv, "/api/view/txn?state=ABORTED"); !strings.Contains(b, fmt.Sprintf(`"id":"%s","state":"ABORTED"`, id)) {
		t.Errorf("after the abort: %s", b)
	}
	// Dropping a registration cancels its lease: it leaves the page.
	_, v := consoleGet(t, srv, "/api/view/mailbox")
	regs := v["registrations"].([]any)
	lease := regs[0].(map[string]any)["lease"].(string)
	if code, body := consoleAct(t, srv, "mailbox", "drop", lease, secret, true); code != http.StatusOK {
		t.Fatalf("drop as operator: %d %s", code, body)
	}
	if _, v = consoleGet(t, srv, "/api/view/mailbox"); len(v["registrations"].([]any)) != 0 {
		t.Errorf("after the drop: %v", v["registrations"])
	}
	if code, body := consoleAct(t, srv, "mailbox", "drop", lease, secret, true); code != http.StatusNotFound {
		t.Errorf("drop again: %d %s, want 404", code, body)
	}
}

// TestConsoleUnderMutualTLS: under mutual TLS the admin port speaks TLS;
// the console is read with a client certificate from the cluster's CA,
// and its actions are an operator's (a principal named in the
// configuration) alone.
func TestConsoleUnderMutualTLS(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
	cfg.Security.Operators = []string{"cn:console-admin"}
	srv := servertest.Start(t, cfg)
	if !strings.HasPrefix(srv.AdminURL(), "https://") {
		t.Fatalf("admin URL %s under TLS", srv.AdminURL())
	}
	get := func(cert *tls.Certificate, method, path string) int {
		t.Helper()
		tc := &tls.Config{RootCAs: pki.Roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}, Timeout: servertest.Timeout}
		req, err := http.NewRequest(method, srv.AdminURL()+path, strings.NewReader("target=nobody"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Djinn-Confirm", "yes")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	admin := pki.NewClient(t, "console-admin")
	for _, tt := range []struct {
		name         string
		cert         *tls.Certificate
		method, path string
		want         int
	}{
		{"a probe needs no certificate", nil, "GET", "/healthz", http.StatusOK},
		{"the console wants a client certificate", nil, "GET", "/api/view/cluster", http.StatusForbidden},
		{"a client reads the console", &pki.Client, "GET", "/api/view/cluster", http.StatusOK},
		{"a client is no operator", &pki.Client, "POST", "/api/action/cluster/remove", http.StatusForbidden},
		{"an operator acts (on a member that is not there)", &admin, "POST", "/api/action/cluster/remove", http.StatusNotFound},
		// The profiler is an operator's under TLS (DESIGN.md 7: operator
		// actions need the operator role): a profile or trace runs as long
		// as its caller asks, and stacks show the server's insides.
		{"the profiler wants a certificate", nil, "GET", "/debug/pprof/cmdline", http.StatusForbidden},
		{"a trace wants a certificate", nil, "GET", "/debug/pprof/trace?seconds=0", http.StatusForbidden},
		{"a client does not profile the server", &pki.Client, "GET", "/debug/pprof/goroutine?debug=1", http.StatusForbidden},
		{"an operator profiles", &admin, "GET", "/debug/pprof/goroutine?debug=1", http.StatusOK},
	} {
		if got := get(tt.cert, tt.method, tt.path); got != tt.want {
			t.Errorf("%s: %s %s answered %d, want %d", tt.name, tt.method, tt.path, got, tt.want)
		}
	}
	// The lease list names each lease's principal: the client's.
	c := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.ClientTLS()))
	if _, err := c.Mailbox().Register(t.Context(), time.Minute); err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{RootCAs: pki.Roots, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pki.Client}}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}, Timeout: servertest.Timeout}
	resp, err := hc.Get(srv.AdminURL() + "/api/view/leases?principal=djinn+test+client")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"kind":"mailbox registration","owner":`) || !strings.Contains(string(b), `"principal":"cn:djinn test client"`) {
		t.Errorf("leases of the client's principal: %s", b)
	}
	// Plain HTTP gets no answer from a TLS port.
	if resp, err := http.Get("http://" + srv.AdminAddr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP served under TLS")
		}
	}
}

// TestConsoleShowsAReaderItsOwn: under TLS the console shows an operator
// every principal's resources and any other reader its own alone (other
// principals' services answer it "not found"); lookup items, which any
// principal's lookup finds, it shows to all, but another principal's
// item without its lease, principal and expiry (Resources.List's rule).
func TestConsoleShowsAReaderItsOwn(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	const alice = "cn:djinn test client"
	// check reads every page as alice and as an operator: other is the
	// principal that made the same resources as alice.
	type reader func(page string) map[string]any
	check := func(t *testing.T, asAlice, asOperator reader, other string) {
		for _, page := range []string{"leases", "mailbox", "renewal", "txn", "lock", "lds", "lookup"} {
			a, op := asAlice(page), asOperator(page)
			if page == "lookup" {
				if na, nop := len(a["items"].([]any)), len(op["items"].([]any)); na != nop {
					t.Errorf("lookup items: alice sees %d, the operator %d; want every item (any lookup finds it)", na, nop)
				}
				others := 0
				for _, it := range a["items"].([]any) {
					if m := it.(map[string]any); m["others"] == true {
						others++
						if m["lease"] != "" || m["expires"] != nil {
							t.Errorf("another principal's item as alice sees it: lease %v, expires %v; want neither", m["lease"], m["expires"])
						}
					}
				}
				if others == 0 {
					t.Errorf("lookup items alice sees: none marked another principal's; want %q's", other)
				}
				got := principalsIn(a["items"])
				delete(got, "") // another's item: no principal shown
				if len(got) != 1 || !got[alice] {
					t.Errorf("lookup items alice sees name principals %v, want hers alone: another's item shows without its lease and principal", got)
				}
				if got := principalsIn(op["items"]); !got[alice] || !got[other] {
					t.Errorf("lookup items the operator sees name principals %v, want alice's and %q's", got, other)
				}
				if na, nop := len(a["watches"].([]any)), len(op["watches"].([]any)); na != 1 || nop != 2 {
					t.Errorf("lookup watches: alice sees %d, the operator %d; want her 1 and both", na, nop)
				}
				continue
			}
			if got := principalsIn(a); len(got) != 1 || !got[alice] {
				t.Errorf("%s page as alice shows principals %v, want hers alone", page, got)
			}
			if got := principalsIn(op); !got[alice] || !got[other] {
				t.Errorf("%s page as the operator shows principals %v, want alice's and %q's", page, got, other)
			}
		}
	}
	t.Run("mutual TLS", func(t *testing.T) {
		t.Parallel()
		cfg := servertest.Config(t)
		cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
		cfg.Security.Operators = []string{"cn:ops"}
		cfg.LookupJoin.Enabled = false // only the test's principals
		srv := servertest.Start(t, cfg)
		bob := pki.TLSFor(pki.NewClient(t, "bob"))
		for _, tc := range []*tls.Config{pki.ClientTLS(), bob} {
			servertest.Populate(t, servertest.Dial(t, srv.Addr(), client.WithTLS(tc)), srv.Addr(), time.Minute)
		}
		ops := pki.TLSFor(pki.NewClient(t, "ops"))
		check(t, func(page string) map[string]any { return viewAs(t, srv, pki.ClientTLS(), "", page) },
			func(page string) map[string]any { return viewAs(t, srv, ops, "", page) }, "cn:bob")
	})
	t.Run("TLS, clients without certificates", func(t *testing.T) {
		t.Parallel()
		cfg := servertest.Config(t)
		cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA}
		cfg.LookupJoin.Enabled = false
		srv := servertest.Start(t, cfg)
		anon := &tls.Config{RootCAs: pki.Roots, MinVersion: tls.VersionTLS12}
		for _, tc := range []*tls.Config{pki.ClientTLS(), anon} {
			servertest.Populate(t, servertest.Dial(t, srv.Addr(), client.WithTLS(tc)), srv.Addr(), time.Minute)
		}
		// The join secret makes an operator.
		secret := servertest.Secret(t, srv)
		check(t, func(page string) map[string]any { return viewAs(t, srv, pki.ClientTLS(), "", page) },
			func(page string) map[string]any { return viewAs(t, srv, anon, secret, page) }, "")
		if v := viewAs(t, srv, anon, "", "leases"); len(v["leases"].([]any)) == 0 || principalsIn(v)[alice] {
			t.Errorf("leases an anonymous reader sees: %v; want the anonymous principal's alone", v["leases"])
		}
	})
}

// viewAs reads a console page over TLS with tc, with the join secret when
// one is given.
func viewAs(t *testing.T, srv *server.Server, tc *tls.Config, secret, page string) map[string]any {
	t.Helper()
	req, err := http.NewRequest("GET", srv.AdminURL()+"/api/view/"+page, nil)
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set(server.OperatorHeader, secret)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}, Timeout: servertest.Timeout}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %v", page, resp.StatusCode, v, err)
	}
	return v
}

// principalsIn returns every "principal" value in a decoded JSON value.
func principalsIn(v any) map[string]bool {
	out := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if p, ok := x.(string); ok && k == "principal" {
					out[p] = true
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}
