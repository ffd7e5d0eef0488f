package lookup_test

import (
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
)

// TestLeasePolicy: the granted registration lease, Reggie's rule that the
// maximum grows with the registrations so renewals stay under one per
// MinRenewalInterval.
func TestLeasePolicy(t *testing.T) {
	p := lookup.LeasePolicy{Default: time.Minute, Maximum: 5 * time.Minute, MinRenewalInterval: 100 * time.Millisecond}
	for _, c := range []struct {
		name      string
		requested time.Duration
		regs      int
		want      time.Duration
	}{
		{"a short request is granted", 10 * time.Second, 0, 10 * time.Second},
		{"a long request is cut to the maximum", time.Hour, 10, 5 * time.Minute},
		{"Any gets the default", djinn.Any, 10, time.Minute},
		{"Forever gets the maximum", djinn.Forever, 10, 5 * time.Minute},
		{"3000 registrations: still the maximum", time.Hour, 3000, 5 * time.Minute},
		{"6000 registrations: the maximum doubles", time.Hour, 6000, 10 * time.Minute},
		{"Forever with 36000 registrations: an hour", djinn.Forever, 36000, time.Hour},
		{"a short request stays short however many registrations", time.Second, 1 << 40, time.Second},
		{"no overflow: the maximum saturates at Forever", djinn.Forever, 1 << 62, djinn.Forever},
	} {
		got, err := p.Grant(c.requested, c.regs)
		if err != nil || got != c.want {
			t.Errorf("%s: %s %v, want %s", c.name, got, err, c.want)
		}
	}
	for _, c := range []struct {
		name      string
		p         lookup.LeasePolicy
		requested time.Duration
		regs      int
		names     []string
	}{
		{"a zero duration", p, 0, 1, []string{"registration lease duration 0s"}},
		{"a negative duration", p, -5 * time.Second, 1, []string{"-5s"}},
		{"negative registrations", p, time.Second, -1, []string{"registrations -1"}},
		{"a zero maximum", lookup.LeasePolicy{Default: 1}, time.Second, 1, []string{"maximum 0s"}},
		{"a default above the maximum", lookup.LeasePolicy{Default: time.Hour, Maximum: time.Minute}, time.Second, 1, []string{"default 1h0m0s", "1m0s"}},
		{"a zero default", lookup.LeasePolicy{Maximum: time.Minute}, time.Second, 1, []string{"default 0s"}},
		{"a negative renewal interval", lookup.LeasePolicy{Default: 1, Maximum: 1, MinRenewalInterval: -1}, time.Second, 1, []string{"renewal interval -1ns"}},
	} {
		_, err := c.p.Grant(c.requested, c.regs)
		wantErr(t, err, djinn.InvalidArgument, c.names...)
	}
	if err := lookup.DefaultLeasePolicy().Validate(); err != nil {
		t.Fatal(err)
	}
	// Without a renewal bound the maximum stays put.
	flat := lookup.LeasePolicy{Default: time.Minute, Maximum: time.Minute}
	if got, _ := flat.Limit(1 << 50); got != time.Minute {
		t.Fatalf("limit %s", got)
	}
}
