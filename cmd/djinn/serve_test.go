package main

import (
	"runtime"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/djinn-go/djinn/internal/server"
)

// TestServeFlagsApplied: every flag of djinn serve but --config reaches the
// configuration the server runs with; a flag without a setter would be
// accepted and silently ignored.
func TestServeFlagsApplied(t *testing.T) {
	var final, flagged server.Config
	set := flagSetters(&final, &flagged)
	newServe().Flags().VisitAll(func(f *pflag.Flag) {
		if _, ok := set[f.Name]; !ok && f.Name != "config" {
			t.Errorf("djinn serve --%s has no setter: its value is ignored", f.Name)
		}
	})
}

// TestServeJoinFlags: --join-groups, --join-locators and --join-multicast
// set the [lookup-join] section over the file's and the environment's.
func TestServeJoinFlags(t *testing.T) {
	final, flagged := server.Default(), server.Default()
	final.LookupJoin.Locators = []string{"jini://from-the-file:4160"}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	serveFlags(fs, &flagged)
	if err := fs.Parse([]string{"--join-groups", "lab,ops", "--join-locators", "jini://a:4160,jini://b", "--join-multicast"}); err != nil {
		t.Fatal(err)
	}
	applyFlags(fs, &final, &flagged)
	j := final.LookupJoin
	if !slices.Equal(j.Groups, []string{"lab", "ops"}) || !slices.Equal(j.Locators, []string{"jini://a:4160", "jini://b"}) || !j.Multicast || !j.Enabled {
		t.Errorf("[lookup-join] after the flags: %+v", j)
	}
	if err := final.Check(); err != nil {
		t.Errorf("the configuration the flags made: %v", err)
	}
}

// TestProfileContention: --profile-contention turns on the runtime's mutex
// and block profiles, which are otherwise off: a contended wait is then
// recorded.
func TestProfileContention(t *testing.T) {
	if runtime.SetMutexProfileFraction(-1) != 0 {
		t.Fatal("the mutex profile is on before --profile-contention")
	}
	profileContention(false)
	if runtime.SetMutexProfileFraction(-1) != 0 {
		t.Fatal("profile-contention off turned the mutex profile on")
	}
	profileContention(true)
	t.Cleanup(func() {
		runtime.SetBlockProfileRate(0)
		runtime.SetMutexProfileFraction(0)
	})
	if got := runtime.SetMutexProfileFraction(-1); got != 10 {
		t.Errorf("mutex profile fraction %d, want 10", got)
	}
	before := pprof.Lookup("block").Count()
	ch := make(chan struct{})
	timer := time.AfterFunc(time.Millisecond, func() { close(ch) })
	defer timer.Stop()
	<-ch // a wait of a millisecond: above the 10 µs rate, always recorded
	if after := pprof.Lookup("block").Count(); after <= before {
		t.Errorf("block profile has %d records after a 1ms channel wait, %d before: want more", after, before)
	}
}
