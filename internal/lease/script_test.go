package lease

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/quota"
)

// TestScripts runs the lease protocol scripts under testdata/: commands
// applied to a Table at explicit times, each followed by what changed.
// Rewrite the expected output with -rewrite.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		w := &leaseWorld{t: NewTable(), slack: 30 * time.Second, names: map[djinn.ID]string{}}
		datadriven.RunTest(t, path, w.run)
	})
}

// leaseWorld is a table and the time it is at, as offsets from t0.
type leaseWorld struct {
	t     *Table
	now   time.Duration
	slack time.Duration
	names map[djinn.ID]string
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (w *leaseWorld) at() time.Time { return t0.Add(w.now) }

// cookie names a lease in a script: its cookie is its name's bytes.
func (w *leaseWorld) cookie(name string) djinn.ID {
	var c djinn.ID
	copy(c[:], name)
	w.names[c] = name
	return c
}

// since prints unix nanos as the offset from t0.
func since(n int64) string {
	if n == never {
		return "forever"
	}
	return time.Unix(0, n).Sub(t0).String()
}

func scriptDuration(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	var s string
	d.ScanArgs(t, key, &s)
	v, err := djinn.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%s=%s: %v", key, s, err)
	}
	return v
}

func (w *leaseWorld) run(t *testing.T, d *datadriven.TestData) string {
	var lease string
	if d.HasArg("lease") {
		d.ScanArgs(t, "lease", &lease)
	}
	switch d.Cmd {
	case "policy":
		p := Policy{Default: scriptDuration(t, d, "default"), Max: scriptDuration(t, d, "max")}
		if err := w.t.SetPolicy(1, p); err != nil {
			return err.Error()
		}
		return "ok"
	case "tick":
		w.now += scriptDuration(t, d, "by")
		return fmt.Sprintf("now %s", w.now)
	case "grant":
		exp := toNanos(djinn.AddDuration(w.at(), scriptDuration(t, d, "for")))
		c := w.cookie(lease)
		var p string
		d.MaybeScanArgs(t, "principal", &p)
		if err := w.t.ApplyGrant(c, Owner{Kind: 1, ID: c}, p, exp, horizonOf(exp, w.slack)); err != nil {
			return err.Error()
		}
		return w.show()
	case "quota":
		// quota per=N total=N: the limits on leases of kind 1, each
		// principal's and all together (the quota test-kind).
		var per, total int64
		d.MaybeScanArgs(t, "per", &per)
		d.MaybeScanArgs(t, "total", &total)
		w.t.SetQuota(1, "test-kind")
		w.t.Quotas().ApplyLimits(quota.Limits{"test-kind": {PerPrincipal: per, Total: total}}.Proto())
		return "ok"
	case "held":
		var b strings.Builder
		for _, p := range strings.Fields(d.Input) {
			fmt.Fprintf(&b, "%s holds %d leases, %d of the test kind\n", p, w.t.Quotas().Held(p, quota.Leases), w.t.Quotas().Held(p, "test-kind"))
		}
		fmt.Fprintf(&b, "all hold %d leases", w.t.Quotas().Total(quota.Leases))
		return b.String()
	case "renew":
		return w.renew(t, d, lease)
	case "checkpoint":
		var b strings.Builder
		for _, e := range w.t.DueHorizons(w.at(), w.slack) {
			fmt.Fprintf(&b, "log horizon %s %s\n", w.names[djinn.ID(e.GetCookie())], since(e.GetHorizonUnixNanos()))
		}
		return b.String() + w.applyHorizons()
	case "expire":
		most := 1000
		d.MaybeScanArgs(t, "most", &most)
		batch, next := w.t.PopExpired(w.at(), most)
		var b strings.Builder
		fmt.Fprintf(&b, "expire %s (next due %s)\n", w.cookieNames(batch.Cookies()), since(next))
		fmt.Fprintf(&b, "ended %s\n", w.ownerNames(w.t.ApplyExpire(batch.Cookies())))
		return b.String() + w.show()
	case "cancel":
		c := w.cookie(lease)
		errs, ended := w.t.ApplyCancel([][]byte{c[:]})
		if errs[0] != nil {
			return errs[0].Error()
		}
		return fmt.Sprintf("ended %s\n", w.ownerNames(ended)) + w.show()
	case "restart":
		return w.restart(scriptDuration(t, d, "grace"))
	case "show":
		return w.show()
	}
	d.Fatalf(t, "unknown command %s", d.Cmd)
	return ""
}

// restart is a new leader, or the node restarted: it knows what the log
// holds, and promotes the table.
func (w *leaseWorld) restart(grace time.Duration) string {
	recs := w.t.Records()
	w.t.Reset()
	for _, r := range recs {
		if err := w.t.Restore(r); err != nil {
			return err.Error()
		}
	}
	w.t.Promote(w.at(), grace)
	return w.show()
}

// renew renews one lease; the horizon it needs is logged unless the
// script says the log refuses it (refused).
func (w *leaseWorld) renew(t *testing.T, d *datadriven.TestData, lease string) string {
	c := w.cookie(lease)
	var by string
	d.MaybeScanArgs(t, "by", &by)
	res, pending := w.t.Renew(w.at(), w.slack, by, []djinn.ID{c}, []time.Duration{scriptDuration(t, d, "for")})
	var b strings.Builder
	if res[0].Err != nil {
		fmt.Fprintf(&b, "refused: %v\n", res[0].Err)
		return b.String() + w.show()
	}
	fmt.Fprintf(&b, "granted %s\n", djinn.FormatDuration(res[0].Granted))
	for _, e := range pending.Horizons {
		fmt.Fprintf(&b, "log horizon %s %s\n", w.names[djinn.ID(e.GetCookie())], since(e.GetHorizonUnixNanos()))
	}
	if len(pending.Horizons) > 0 {
		if d.HasArg("refused") {
			w.t.Unrenew(pending)
			b.WriteString("the log refused the horizon: renewal failed, expiration restored\n")
		} else {
			w.t.ApplyHorizon(pending.Horizons)
		}
	}
	return b.String() + w.show()
}

func (w *leaseWorld) applyHorizons() string {
	w.t.ApplyHorizon(w.t.DueHorizons(w.at(), w.slack))
	return w.show()
}

func (w *leaseWorld) cookieNames(cs [][]byte) string {
	var out []string
	for _, c := range cs {
		out = append(out, w.names[djinn.ID(c)])
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " ") + "]"
}

func (w *leaseWorld) ownerNames(os []Owner) string {
	var out []string
	for _, o := range os {
		out = append(out, w.names[o.ID])
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " ") + "]"
}

// show prints every lease: its live expiration (the leader's) and its
// logged horizon, and whether it is alive now.
func (w *leaseWorld) show() string {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	var lines []string
	n := w.at().UnixNano()
	w.t.recs.Each(func(_ uint32, r *record) {
		state := "alive"
		if r.expires <= n {
			state = "expired"
		}
		lines = append(lines, fmt.Sprintf("%s: expires %s, horizon %s, %s", w.names[r.cookie], since(r.expires), since(r.horizon), state))
	})
	if len(lines) == 0 {
		return "no leases"
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
