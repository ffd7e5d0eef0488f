package state_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The rules version (rules.go): our own rule, no spec's. Each test row
// names the rule it checks.

func initCmd(rules uint32) *statepb.Command {
	id := djinn.NewID()
	return &statepb.Command{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: id[:], RulesVersion: rules}}}
}

func raiseCmd(v uint32) *statepb.Command {
	return &statepb.Command{Op: &statepb.Command_RulesRaise{RulesRaise: &statepb.RulesRaise{Version: v}}}
}

func memberCmd(node string) *statepb.Command {
	return &statepb.Command{Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: node, GrpcAddress: "127.0.0.1:1", RulesMax: 2}}}
}

// versionedMachine is a bare machine whose binary supports rules up to
// max, with a part that decides each TxnForget by the rules version in
// force: the pattern of a rule that differs by version.
type versionedMachine struct {
	*state.Machine
	decided []uint32 // the rules version each TxnForget was decided by
}

func newVersioned(t *testing.T, max uint32) *versionedMachine {
	t.Helper()
	v := &versionedMachine{Machine: state.New()}
	v.SetMaxRules(max)
	err := v.Add(state.Part{
		Name: "versioned",
		Commands: []state.Command{state.On(func(_ int64, _ *statepb.TxnForget) any {
			if v.Rules() >= 2 {
				v.decided = append(v.decided, 2) // the new rule
			} else {
				v.decided = append(v.decided, 1) // the old rule
			}
			return nil
		})},
		Reset: func() {},
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// apply applies cmds as log entries from index first on, failing on an
// error result.
func (v *versionedMachine) apply(t *testing.T, first uint64, cmds ...*statepb.Command) {
	t.Helper()
	for i, c := range cmds {
		if err, ok := v.Apply(first+uint64(i), c).(error); ok {
			t.Fatalf("entry %d: %v", first+uint64(i), err)
		}
	}
}

func forgetCmd() *statepb.Command {
	return &statepb.Command{Op: &statepb.Command_TxnForget{TxnForget: &statepb.TxnForget{}}}
}

func TestRules_ANewClusterStartsAtItsInitsVersion(t *testing.T) {
	for _, tc := range []struct {
		name        string
		max, init   uint32
		wantRules   uint32
		wantStopped bool
	}{
		{"the first leader's highest", 2, 2, 2, false},
		{"an Init without one (a log from before rules versions) is 1", 2, 0, 1, false},
		{"a binary supporting less refuses it", 1, 2, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVersioned(t, tc.max)
			res := v.Apply(1, initCmd(tc.init))
			err, _ := res.(error)
			if tc.wantStopped {
				checkRefusal(t, err, "log entry 1", tc.init, tc.max)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Rules(); got != tc.wantRules {
				t.Fatalf("rules = %d, want %d", got, tc.wantRules)
			}
		})
	}
}

func TestRules_ARaiseTakesEffectAtItsEntryAndNeverLowers(t *testing.T) {
	v := newVersioned(t, 2)
	v.apply(t, 1, initCmd(1))
	changed := v.RulesChanged()
	v.apply(t, 2, forgetCmd(), raiseCmd(2), forgetCmd(), raiseCmd(1), forgetCmd())
	select {
	case <-changed:
	default:
		t.Fatal("RulesChanged not closed by the raise")
	}
	if got := v.Rules(); got != 2 {
		t.Fatalf("rules = %d after a raise to 2 and one to 1, want 2", got)
	}
	if want := []uint32{1, 2, 2}; !slices.Equal(v.decided, want) {
		t.Fatalf("entries decided by rules %v, want %v", v.decided, want)
	}
}

// Apply decides an entry by the version in force at that entry, also when
// the log is replayed after a restart from a snapshot taken before the
// raise, or after it.
func TestRules_ReplayDecidesEachEntryByTheVersionAtIt(t *testing.T) {
	log := []*statepb.Command{initCmd(1), forgetCmd(), raiseCmd(2), forgetCmd(), forgetCmd()}
	whole := newVersioned(t, 2)
	whole.apply(t, 1, log...)
	for cut := 1; cut < len(log); cut++ {
		first := newVersioned(t, 2)
		first.apply(t, 1, log[:cut]...)
		snap := snapshot(t, first.Machine)
		restarted := newVersioned(t, 2)
		if err := restarted.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		restarted.apply(t, uint64(cut+1), log[cut:]...)
		got := append(append([]uint32{}, first.decided...), restarted.decided...)
		if !slices.Equal(got, whole.decided) {
			t.Errorf("snapshot after entry %d: entries decided by rules %v, want %v", cut, got, whole.decided)
		}
	}
}

func TestRules_AFollowerSupportingLessStopsAtTheRaise(t *testing.T) {
	v := newVersioned(t, 1)
	v.apply(t, 1, initCmd(1), forgetCmd())
	err, _ := v.Apply(3, raiseCmd(2)).(error)
	checkRefusal(t, err, "log entry 3", 2, 1)
	select {
	case <-v.Stopped():
	default:
		t.Fatal("Stopped not closed")
	}
	if !errors.Is(v.Refusal(), err) {
		t.Fatalf("Refusal() = %v, want %v", v.Refusal(), err)
	}
	// Nothing after it applies: every later entry answers the refusal.
	if res, _ := v.Apply(4, memberCmd("n2")).(error); res == nil {
		t.Fatal("an entry after the refused raise applied")
	}
	v.Apply(5, forgetCmd())
	if _, ok := v.Member("n2"); ok || len(v.decided) != 1 || v.Rules() != 1 {
		t.Fatalf("state changed after the refusal: member n2 %v, decided %v, rules %d", ok, v.decided, v.Rules())
	}
	// Its state is not the log's through the applied index: no snapshot.
	if _, err := v.Snapshot(); err == nil {
		t.Fatal("a stopped machine took a snapshot")
	}
}

func TestRules_ASnapshotAtAHigherVersionIsRefusedOnRestore(t *testing.T) {
	newer := newVersioned(t, 2)
	newer.apply(t, 1, initCmd(1), raiseCmd(2), memberCmd("n1"))
	snap := snapshot(t, newer.Machine)

	again := newVersioned(t, 2)
	if err := again.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if again.Rules() != 2 {
		t.Fatalf("restored rules = %d, want 2", again.Rules())
	}
	if info, _ := again.Member("n1"); info.RulesMax != 2 {
		t.Fatalf("restored member's rules max = %d, want 2", info.RulesMax)
	}

	older := newVersioned(t, 1)
	err := older.Restore(bytes.NewReader(snap))
	checkRefusal(t, err, "snapshot", 2, 1)
	if !replica.IsRefusal(err) {
		t.Fatalf("the refusal %v is not a replica refusal", err)
	}
}

func checkRefusal(t *testing.T, err error, where string, version, max uint32) {
	t.Helper()
	var re *state.RulesError
	if !errors.As(err, &re) {
		t.Fatalf("error = %v, want a RulesError", err)
	}
	if re.Version != version || re.Max != max {
		t.Fatalf("refusal of version %d by max %d, want %d by %d", re.Version, re.Max, version, max)
	}
	msg := err.Error()
	for _, want := range []string{where, "rules version is " + fmt.Sprint(version), "up to version " + fmt.Sprint(max), "run a djinn binary"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
}
