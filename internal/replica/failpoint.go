//go:build !djinn_failpoint_fsync

package replica

// stallFsync is a failpoint the robustness suite compiles in with the
// djinn_failpoint_fsync tag (failpoint_fsync.go). Without the tag it does
// nothing and is compiled out.
func stallFsync(string) {}
