package robust

import (
	"strings"
	"testing"
)

// TestIsolationCheckerCatches: the isolation checker passes attempts
// answered NOT_FOUND or not answered at all, and fails, naming the call,
// the code and the phase, an attempt answered otherwise and a change the
// owner found.
func TestIsolationCheckerCatches(t *testing.T) {
	clean := []Attempt{
		{What: "lease cancel of lock owner", Code: "NotFound", Err: "not found", Phase: "fault 1 of 4: kill -9 leader"},
		{What: "pull of mailbox registration", Phase: "fault 2 of 4: minority partition"},
	}
	if v := CheckIsolation(clean, nil); len(v) != 0 {
		t.Fatalf("attempts that keep the rule: %q", v)
	}
	for _, tc := range []struct {
		name     string
		attempts []Attempt
		changed  []string
		want     string
	}{
		{"an attempt answered", append(clean, Attempt{What: "commit of transaction", Code: "OK", Phase: "after the faults"}),
			nil, `another principal's commit of transaction was answered OK () during "after the faults": it must get NOT_FOUND`},
		{"another code after a failover", append(clean, Attempt{What: "ack of mailbox registration", Code: "Internal", Err: "boom", Phase: "fault 1 of 4: kill -9 leader"}),
			nil, `ack of mailbox registration was answered Internal (boom) during "fault 1 of 4: kill -9 leader"`},
		{"permission denied says it exists", append(clean, Attempt{What: "get set of renewal set", Code: "PermissionDenied", Err: "not yours"}),
			nil, "get set of renewal set was answered PermissionDenied (not yours)"},
		{"an effect on the owner's resource", clean, []string{"the owner's transaction: it is TRANSACTION_STATE_ABORTED, not active"},
			"another principal's calls took effect: the owner's transaction: it is TRANSACTION_STATE_ABORTED, not active"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := CheckIsolation(tc.attempts, tc.changed)
			if len(v) != 1 || !strings.Contains(v[0], tc.want) {
				t.Errorf("got %q, want one violation containing %q", v, tc.want)
			}
		})
	}
}
