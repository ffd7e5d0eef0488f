package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// raft's transport and the WAL leave background goroutines that
		// exit shortly after Shutdown.
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*NetworkTransport).listen"),
		goleak.IgnoreTopFunction("github.com/hashicorp/raft-wal.(*WAL).runRotate"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*netPipeline).decodeResponses"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"),
	)
}
