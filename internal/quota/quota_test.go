package quota

import (
	"errors"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
)

func TestLedger(t *testing.T) {
	l := New()
	l.ApplyLimits(Limits{
		LookupItems: {PerPrincipal: 2, Total: 4, Principals: map[string]int64{"cn:big": 3, "peer": 0}},
	}.Proto())
	take := func(p string, n int64) error { return l.Take(p, LookupItems, n) }
	for _, step := range []struct {
		p    string
		n    int64
		want string // "" succeeds; else the refusal names it
	}{
		{"cn:a", 2, ""},
		{"cn:a", 1, `principal "cn:a" holds 2`},
		{"cn:big", 2, ""}, // its own limit, 3
		{"peer", 1, "the server holds 4"},
		{"cn:b", 1, "the server holds 4"},
	} {
		err := take(step.p, step.n)
		switch {
		case step.want == "" && err != nil:
			t.Fatalf("%s takes %d: %v", step.p, step.n, err)
		case step.want != "" && (!errors.Is(err, djinn.ErrResourceExhausted) || !strings.Contains(err.Error(), step.want) || !strings.Contains(err.Error(), string(LookupItems))):
			t.Fatalf("%s takes %d: %v, want resource exhausted naming the quota and %q", step.p, step.n, err, step.want)
		}
	}
	if l.Held("cn:a", LookupItems) != 2 || l.Total(LookupItems) != 4 {
		t.Fatalf("held %d, total %d; refusals counted something", l.Held("cn:a", LookupItems), l.Total(LookupItems))
	}
	l.Release("cn:a", LookupItems, 2)
	if err := take("peer", 2); err != nil {
		t.Fatalf("the peers (no limit of their own) take what cn:a released: %v", err)
	}
	if err := take("cn:b", 1); err == nil {
		t.Fatal("the total let one more in")
	}
	if err := l.Take("cn:a", LockOwners, 1000); err != nil {
		t.Fatalf("a quota without limits refused: %v", err)
	}
	l.Add("cn:a", LookupItems, 10) // restored: counted, never refused
	if l.Held("cn:a", LookupItems) != 10 {
		t.Fatal("Add did not count")
	}
	l.Reset()
	if len(l.Limits()) != 0 || l.Total(LookupItems) != 0 {
		t.Fatal("Reset kept something")
	}
}

func TestLimitsProto(t *testing.T) {
	lim := Limits{
		LookupItems: {PerPrincipal: 2, Total: 4, Principals: map[string]int64{"cn:big": 3}},
		Leases:      {PerPrincipal: 9},
	}
	back := FromProto(lim.Proto())
	if !back.Equal(lim) || back.Equal(Limits{Leases: {PerPrincipal: 9}}) {
		t.Fatalf("limits %v came back %v", lim, back)
	}
	if q := lim.Proto().GetQuotas(); q[0].GetName() != string(Leases) {
		t.Fatalf("quotas out of name order: %v", q)
	}
}
