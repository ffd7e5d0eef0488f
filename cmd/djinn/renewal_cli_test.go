package main

import (
	"strings"
	"testing"
)

type renewalListenerJSON struct {
	Listener   string `json:"listener"`
	Handback   string `json:"handback"`
	MinWarning *struct {
		Seconds *float64 `json:"seconds"`
		Human   string   `json:"human"`
	} `json:"min_warning"`
	NextSeq int64 `json:"next_sequence,string"`
}

type renewalSetJSON struct {
	ID                string               `json:"set"`
	Ref               string               `json:"reference"`
	Lease             leaseJSON            `json:"lease"`
	Leases            int64                `json:"leases"`
	ExpirationWarning *renewalListenerJSON `json:"expiration_warning"`
	RenewalFailure    *renewalListenerJSON `json:"renewal_failure"`
}

type mailboxRegJSON struct {
	ID       string    `json:"registration"`
	Listener string    `json:"listener"`
	Lease    leaseJSON `json:"lease"`
}

// renewalScript is TestCLIRenewal's state: a set and two mailbox
// registrations whose leases it renews.
type renewalScript struct {
	*rig
	set  renewalSetJSON
	a, b mailboxRegJSON
}

func (s *renewalScript) show(id string) renewalSetJSON {
	s.t.Helper()
	var v renewalSetJSON
	s.json(&v, "renewal", "show", id)
	return v
}

// TestCLIRenewal runs the renewal commands against a real server: a set
// renews mailbox registrations' leases, lists, shows, and lets them go.
func TestCLIRenewal(t *testing.T) {
	s := &renewalScript{rig: newRig(t)}
	s.createAndAdd()
	s.listeners()
	s.remove()
	s.errorRows()
	// LR.2: the set's lease cancelled, the set is gone.
	s.must("lease", "cancel", s.set.Lease.Token)
	if _, errs, ok := s.run("renewal", "show", s.set.ID); ok || !strings.Contains(errs, "no such set") {
		t.Errorf("show of a cancelled set: ok=%v stderr %q", ok, errs)
	}
}

// createAndAdd: a set, and two mailbox registrations' leases in it, one
// by token, one by short name.
func (s *renewalScript) createAndAdd() {
	t := s.t
	s.json(&s.set, "renewal", "create", "--lease", "1h")
	if s.set.ID == "" || !strings.Contains(s.set.Ref, s.set.ID) || !strings.HasPrefix(s.set.Lease.Token, "djinn-lease:") || s.set.Leases != 0 {
		t.Fatalf("create printed %+v", s.set)
	}
	if text := s.must("renewal", "show", s.set.ID); !strings.Contains(text, s.set.ID) || !strings.Contains(text, "warning    (none)") {
		t.Errorf("show printed:\n%s", text)
	}
	s.json(&s.a, "mailbox", "register", "--lease", "10m")
	s.json(&s.b, "mailbox", "register", "--lease", "10m")
	s.must("renewal", "add", s.set.ID, s.a.Lease.Token, "--desired", "1h", "--renew", "1m")
	s.must("renewal", "add", s.set.ID, s.b.Lease.Name, "--desired", "forever")
	var leases []struct {
		Lease    string  `json:"lease"`
		Landlord string  `json:"landlord"`
		Desired  *string `json:"desired_expiration"`
		Renew    struct {
			Seconds *float64 `json:"seconds"`
			Human   string   `json:"human"`
		} `json:"renew"`
		LastError *string `json:"last_error"`
		Token     string  `json:"token"`
	}
	s.json(&leases, "renewal", "ls", s.set.ID)
	if len(leases) != 2 || leases[0].Renew.Human != "1m0s" || *leases[0].Renew.Seconds != 60 || leases[0].Landlord != s.a.Lease.Landlord ||
		leases[1].Desired != nil || leases[1].Renew.Human != "forever" || leases[1].Renew.Seconds != nil || leases[0].LastError != nil ||
		leases[1].Lease != s.b.Lease.Name {
		t.Fatalf("ls printed %+v", leases)
	}
	if text := s.must("renewal", "ls", s.set.ID); strings.Count(text, "landlord=") != 2 || !strings.Contains(text, "desired=never renew=forever") {
		t.Errorf("ls printed:\n%s", text)
	}
}

// listeners: a warning and a failure listener, shown, then cleared.
func (s *renewalScript) listeners() {
	t := s.t
	s.must("renewal", "warn", s.set.ID, "--listener", s.a.Listener, "--min-warning", "1m", "--handback", "wake")
	s.must("renewal", "failures", s.set.ID, "--listener", s.b.Listener)
	v := s.show(s.set.ID)
	w := v.ExpirationWarning
	if v.Leases != 2 || w == nil || w.Listener != s.a.Listener || w.MinWarning == nil || w.MinWarning.Human != "1m0s" ||
		w.Handback != "wake" || w.NextSeq < 1 || v.RenewalFailure == nil || v.RenewalFailure.Listener != s.b.Listener {
		t.Fatalf("show printed %+v", v)
	}
	s.must("renewal", "clear-warn", s.set.ID)
	s.must("renewal", "clear-failures", s.set.ID)
	if v := s.show(s.set.ID); v.ExpirationWarning != nil || v.RenewalFailure != nil {
		t.Errorf("after clearing: %+v", v)
	}
}

// remove: out of the set, not cancelled; a second remove is a negative
// answer (exit 1).
func (s *renewalScript) remove() {
	t := s.t
	var removed struct {
		Removed bool      `json:"removed"`
		Lease   leaseJSON `json:"lease"`
	}
	s.json(&removed, "renewal", "remove", s.set.ID, s.a.Lease.Token)
	if !removed.Removed || removed.Lease.Landlord != s.a.Lease.Landlord {
		t.Errorf("remove printed %+v", removed)
	}
	if text, errs, ok := s.run("renewal", "remove", s.set.ID, s.a.Lease.Name); ok || !strings.Contains(text, "not in the set") || !strings.Contains(errs, "not in set") {
		t.Errorf("second remove: ok=%v printed %q, stderr %q", ok, text, errs)
	}
	if v := s.show(s.set.ID); v.Leases != 1 {
		t.Errorf("after remove: %d leases, want 1", v.Leases)
	}
}

// errorRows: one line, non-zero exit, naming what is wrong.
func (s *renewalScript) errorRows() {
	set, a := s.set, s.a
	s.errors([]errRow{
		{[]string{"renewal", "create", "--lease", "0s"}, "0s"},
		{[]string{"renewal", "add", set.ID, a.Lease.Token, "--desired", "1h", "--renew", "-5s"}, "-5s"},
		{[]string{"renewal", "add", set.ID, a.Lease.Token, "--desired", "soon"}, "soon"},
		{[]string{"renewal", "add", set.ID, "djinn-lease:garbage", "--desired", "1h"}, "LEASE"},
		{[]string{"renewal", "add", set.ID, set.Lease.Token, "--desired", "1h"}, "granted by this renewal service"},
		{[]string{"renewal", "show", "1234"}, "1234"},
		{[]string{"renewal", "warn", set.ID, "--listener", "not-a-reference", "--min-warning", "1m"}, "not-a-reference"},
		{[]string{"renewal", "warn", set.ID, "--listener", a.Listener, "--min-warning", "-1m"}, "-1m"},
		{[]string{"renewal", "add", set.ID, a.Lease.Token}, "--desired: missing"},
		{[]string{"renewal", "warn", set.ID, "--listener", a.Listener}, "--min-warning: missing"},
	})
}
