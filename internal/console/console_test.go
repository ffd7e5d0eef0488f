package console

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/djinn-go/djinn"
)

// memSource is a console source in memory: one page, whose view echoes
// its query and who reads it, and one action that records what it was
// asked. Its reader is the request's reader parameter; "nobody" may not
// read.
type memSource struct {
	version atomic.Uint64
	acted   atomic.Value // string
}

func (m *memSource) source(done <-chan struct{}) Source {
	return Source{
		Pages: []Page{{Name: "things", Title: "Things"}},
		View: func(ctx context.Context, page string, q url.Values) (any, error) {
			if q.Get("bad") != "" {
				return nil, djinn.Errorf(djinn.InvalidArgument, "bad %q: not a term", q.Get("bad"))
			}
			who, _ := ctx.Value(readerKey{}).(string)
			return map[string]string{"page": page, "q": q.Get("q"), "reader": who}, nil
		},
		Reader: func(r *http.Request) (context.Context, error) {
			who := r.URL.Query().Get("reader")
			if who == "nobody" {
				return nil, errors.New("nobody may read the console")
			}
			return context.WithValue(r.Context(), readerKey{}, who), nil
		},
		Act: func(_ context.Context, page, action, target string) error {
			if action != "drop" {
				return djinn.Errorf(djinn.InvalidArgument, "action %q: none such", action)
			}
			m.acted.Store(page + " " + action + " " + target)
			return nil
		},
		Operator: func(r *http.Request) error {
			if r.Header.Get("Djinn-Join-Secret") != "s3cret" {
				return errors.New("needs the operator role")
			}
			return nil
		},
		Version: m.version.Load,
		Done:    done,
	}
}

type readerKey struct{}

func serve(t *testing.T, src Source) *httptest.Server {
	mux := http.NewServeMux()
	Register(mux, src)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// post sends a form naming target t1 to path, with the operator's secret
// and the confirmation if given, and answers the status code.
func post(t *testing.T, srv *httptest.Server, path, secret string, confirmed bool) int {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader("target=t1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if confirmed {
		req.Header.Set(ConfirmHeader, "yes")
	}
	if secret != "" {
		req.Header.Set("Djinn-Join-Secret", secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// get fetches path and answers the status code and the body.
func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestConsoleRoutes(t *testing.T) {
	m := &memSource{}
	done := make(chan struct{})
	defer close(done)
	srv := serve(t, m.source(done))
	for _, tt := range []struct {
		path string
		code int
		body string
	}{
		{"/", 200, "<title>djinn console</title>"},
		{"/console/console.js", 200, "EventSource"},
		{"/console/console.css", 200, ".countdown"},
		{"/api/pages", 200, `[{"name":"things","title":"Things"}]`},
		{"/api/view/things?q=x", 200, `"q":"x"`},
		{"/api/view/things?reader=ann", 200, `"reader":"ann"`},
		{"/api/view/things?reader=nobody", 403, "nobody may read"},
		{"/api/pages?reader=nobody", 403, "nobody may read"},
		{"/?reader=nobody", 403, "nobody may read"},
		{"/api/events?reader=nobody", 403, "nobody may read"},
		{"/api/view/things?bad=y", 400, `bad \"y\": not a term`},
		{"/api/view/nothing", 404, "no such page"},
		{"/console/missing.js", 404, ""},
	} {
		code, body := get(t, srv, tt.path)
		if code != tt.code || !strings.Contains(body, tt.body) {
			t.Errorf("GET %s: %d %.80q, want %d with %q", tt.path, code, body, tt.code, tt.body)
		}
	}
}

func TestConsoleActions(t *testing.T) {
	m := &memSource{}
	done := make(chan struct{})
	defer close(done)
	srv := serve(t, m.source(done))
	for _, tt := range []struct {
		name, path, secret string
		confirmed          bool
		code               int
	}{
		{"unconfirmed", "/api/action/things/drop", "s3cret", false, 400},
		{"no operator", "/api/action/things/drop", "", true, 403},
		{"unknown page", "/api/action/nothing/drop", "s3cret", true, 404},
		{"unknown action", "/api/action/things/burn", "s3cret", true, 400},
		{"done", "/api/action/things/drop", "s3cret", true, 200},
	} {
		if code := post(t, srv, tt.path, tt.secret, tt.confirmed); code != tt.code {
			t.Errorf("%s: POST %s answered %d, want %d", tt.name, tt.path, code, tt.code)
		}
	}
	if got, _ := m.acted.Load().(string); got != "things drop t1" {
		t.Errorf("acted %q, want the one confirmed operator's drop", got)
	}
	if code := post(t, srv, "/api/view/things", "s3cret", true); code != http.StatusMethodNotAllowed {
		t.Errorf("POST to a view: %d, want 405", code)
	}
}

// TestConsoleEvents: the live stream speaks at once, then whenever the
// version changes, and ends when the server is done.
func TestConsoleEvents(t *testing.T) {
	m := &memSource{}
	done := make(chan struct{})
	srv := serve(t, m.source(done))
	resp, err := http.Get(srv.URL + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	next := func() string {
		t.Helper()
		for lines.Scan() {
			if l := lines.Text(); l != "" {
				return l
			}
		}
		return "end: " + errString(lines.Err())
	}
	if got := next(); got != `data: {"version":0}` {
		t.Fatalf("first event %q", got)
	}
	m.version.Store(7)
	// The next event carries the new version; ticks in between repeat
	// the old one.
	for {
		got := next()
		if got == `data: {"version":7}` {
			break
		}
		if got != `data: {"version":0}` {
			t.Fatalf("event %q, want version 7", got)
		}
	}
	close(done)
	for {
		if got := next(); strings.HasPrefix(got, "end: ") {
			break
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "EOF"
	}
	return err.Error()
}

// TestConsoleIsNeverFramed: every answer of the console forbids framing
// it — the page, its assets, its views, its events and its actions — so
// that no page of another site shows the console under its own buttons
// and leads an operator to click an action and its confirmation.
func TestConsoleIsNeverFramed(t *testing.T) {
	m := &memSource{}
	done := make(chan struct{})
	defer close(done)
	srv := serve(t, m.source(done))
	check := func(method, path string, h http.Header) {
		t.Helper()
		if got := h.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("%s %s: X-Frame-Options %q, want DENY", method, path, got)
		}
		if got := h.Get("Content-Security-Policy"); got != "frame-ancestors 'none'" {
			t.Errorf("%s %s: Content-Security-Policy %q, want frame-ancestors 'none'", method, path, got)
		}
	}
	for _, path := range []string{"/", "/console/console.js", "/api/pages", "/api/view/things", "/api/view/nothing", "/?reader=nobody"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		check("GET", path, resp.Header)
	}
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	check("GET", "/api/events", resp.Header)
	cancel()
	resp.Body.Close()
	req, _ = http.NewRequest("POST", srv.URL+"/api/action/things/drop", strings.NewReader("target=t1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(ConfirmHeader, "yes")
	req.Header.Set("Djinn-Join-Secret", "s3cret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the action answered %d", resp.StatusCode)
	}
	check("POST", "/api/action/things/drop", resp.Header)
}
