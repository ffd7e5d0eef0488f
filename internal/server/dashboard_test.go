package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"

	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// The Grafana dashboard and the Prometheus alerting rules shipped in
// deploy/ are built on the series a server exports: every query of either
// names only series that a real cluster, with state in every service,
// answers on /metrics.

const (
	dashboardFile = "../../deploy/grafana-dashboard.json"
	alertsFile    = "../../deploy/prometheus-alerts.yml"
)

// prometheusSeries are series Prometheus makes itself, not a target.
var prometheusSeries = map[string]bool{"up": true}

func TestDashboardAndAlertsNameExportedSeries(t *testing.T) {
	t.Parallel()
	queries := dashboardQueries(t)
	rules := alertQueries(t)
	if len(queries) < 20 || len(rules) < 8 {
		t.Fatalf("%d dashboard queries and %d alert rules: want the files' full sets", len(queries), len(rules))
	}
	all := append(queries, rules...)
	want, wantTLS := map[string]bool{}, map[string]bool{}
	for _, q := range all {
		names := seriesIn(q)
		if len(names) == 0 {
			t.Errorf("query %q names no series", q)
		}
		for _, n := range names {
			switch {
			case prometheusSeries[n]:
			case strings.HasPrefix(n, "djinn_tls_"):
				wantTLS[n] = true // a TLS server's alone
			default:
				want[n] = true
			}
		}
	}
	tlsSeriesExported(t, wantTLS)
	// Timeouts that keep leadership steady under the race detector and
	// parallel tests: the population is written through one leader.
	srvs := servertest.StartCluster(t, 3, func(c *server.Config) {
		c.Raftcfg.HeartbeatTimeout = server.Duration(500 * time.Millisecond)
		c.Raftcfg.ElectionTimeout = server.Duration(500 * time.Millisecond)
	})
	leader := servertest.ServingLeader(t, srvs...)
	c := servertest.Dial(t, leader.Addr())
	servertest.Populate(t, c, leader.Addr(), time.Minute)
	// Series that record an event (a replication round, an outgoing
	// call) appear once it happened: wait for them, then name what never
	// came.
	missing := []string{"(no leader to scrape)"}
	servertest.Poll(servertest.Timeout, func() bool {
		// The leader's series include its view of the members: scrape
		// whichever leads now.
		leader := servertest.Leader(srvs...)
		if leader == nil {
			return false
		}
		have := scrapedSeries(t, leader)
		missing = missing[:0]
		for n := range want {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0
	})
	slices.Sort(missing)
	for _, n := range missing {
		t.Errorf("series %s: named by the dashboard or the alerts, not exported", n)
	}
	memberDown(t, srvs)
}

// tlsSeriesExported checks that a TLS server exports the series want.
func tlsSeriesExported(t *testing.T, want map[string]bool) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("no alert on the TLS files' series (djinn_tls_*)")
	}
	pki := servertest.NewPKI(t)
	cfg := servertest.Config(t)
	crl := filepath.Join(t.TempDir(), "crl.pem")
	pki.WriteCRL(t, crl)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, CRL: crl}
	srv := servertest.Start(t, cfg)
	have := map[string]bool{}
	for series := range scrapeTLS(t, srv, pki.ClientTLS()) {
		if i := strings.IndexAny(series, "{ "); i > 0 {
			series = series[:i]
		}
		have[series] = true
	}
	for n := range want {
		if !have[n] {
			t.Errorf("series %s: named by the alerts, not exported by a TLS server", n)
		}
	}
}

// memberDown stops a follower of srvs and waits for the leader to export
// it as down (djinn_member_up{node} 0, what DjinnMemberDown alerts on)
// while it goes on exporting each other member as up and its lag.
func memberDown(t *testing.T, srvs []*server.Server) {
	t.Helper()
	leader := servertest.ServingLeader(t, srvs...)
	var down *server.Server
	for _, s := range srvs {
		if s != leader {
			down = s
		}
	}
	if err := down.Close(); err != nil {
		t.Fatal(err)
	}
	series := func(name, node string) string { return fmt.Sprintf("%s{node=%q}", name, node) }
	servertest.Eventually(t, "the leader to export the stopped member as down", func() bool {
		l := servertest.Leader(srvs...)
		if l == nil {
			return false
		}
		m := scrape(t, l)
		for _, s := range srvs {
			up, ok := m[series("djinn_member_up", s.NodeID())]
			_, lag := m[series("djinn_raft_follower_lag_entries", s.NodeID())]
			if s == down && (!ok || up != 0 || lag) || s != down && (!ok || up != 1 || !lag) {
				return false
			}
		}
		return true
	})
}

// dashboardQueries returns every PromQL expression of the dashboard: its
// panels' targets and its templating queries.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string
		UID    string
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Type  string
				Query any
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("%s: a dashboard needs a title and a uid", dashboardFile)
	}
	var qs []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			qs = append(qs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok && v.Type == "query" {
			// label_values(series, label): the series is the query.
			s, _ := q["query"].(string)
			s = strings.TrimPrefix(s, "label_values(")
			s, _, _ = strings.Cut(s, ",")
			qs = append(qs, s)
		}
	}
	return qs
}

// alertQueries returns the expressions of the alerting rules.
func alertQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For string
				Labels           map[string]string
				Annotations      map[string]string
			}
		}
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var qs []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("rule %q: wants a name, a severity, a summary and a description", r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("rule %q: for %q: %v", r.Alert, r.For, err)
				}
			}
			qs = append(qs, r.Expr)
		}
	}
	return qs
}

var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers  = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promOperators = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true}
)

// seriesIn returns the series names a PromQL expression reads: its
// identifiers that are neither functions, keywords nor label names.
func seriesIn(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		id := e[loc[0]:loc[1]]
		rest := strings.TrimLeft(e[loc[1]:], " ")
		if strings.HasPrefix(rest, "(") || promOperators[id] || (loc[0] > 0 && strings.ContainsAny(e[loc[0]-1:loc[0]], "0123456789.")) {
			continue
		}
		names = append(names, id)
	}
	return names
}

// scrapedSeries returns the names of the series a server's /metrics
// answers.
func scrapedSeries(t *testing.T, srv *server.Server) map[string]bool {
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
	have := map[string]bool{}
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.IndexAny(l, "{ "); i > 0 {
			have[l[:i]] = true
		}
	}
	return have
}

func TestSeriesIn(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (instance, le) (rate(djinn_raft_log_write_seconds_bucket{instance=~"$instance"}[5m]))`: "djinn_raft_log_write_seconds_bucket",
		`max(djinn_raft_leader_known) == 0 or absent(djinn_raft_leader_known)`:                         "djinn_raft_leader_known djinn_raft_leader_known",
		`djinn_raft_follower_lag_entries > 10000`:                                                      "djinn_raft_follower_lag_entries",
		`up == 0 and on (job, instance) max_over_time(djinn_is_leader[1h])`:                            "up djinn_is_leader",
		`histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m]))) > 0.5`:                             "x_bucket",
		`increase(a_total[1h]) > 3e2`:                                                                  "a_total",
	} {
		if got := strings.Join(seriesIn(expr), " "); got != want {
			t.Errorf("seriesIn(%q) = %q, want %q", expr, got, want)
		}
	}
}
