// Package djinn is the shared vocabulary of djinn, the Jini service
// infrastructure rebuilt in Go: lease durations with Forever and Any, 128-bit
// IDs, remote references, and the error kinds every djinn service and client
// speaks.
//
// The client library (package client) is how programs use djinn; this package
// holds only the words both sides share, so that a value named here means the
// same thing in a server, a client and a test.
package djinn
