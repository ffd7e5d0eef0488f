//go:build !djinn_failpoint_snapshot

package replica

// snapshotFailpoint and stallSnapshot are a failpoint the robustness suite
// compiles in with the djinn_failpoint_snapshot tag
// (failpoint_snapshot.go). Without the tag they do nothing and are
// compiled out.
const snapshotFailpoint = false

func stallSnapshot(_, _ string) {}
