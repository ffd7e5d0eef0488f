package main

import (
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
)

// roleRefused matches a server's refusal for want of the operator role
// (or a peer's): the server names the gRPC method called, which the
// command's user never typed.
var roleRefused = regexp.MustCompile(`/djinn\.v1\.\w+/\w+ (needs the operator role|is for the cluster's servers and operators)`)

// inCommandWords words a server's refusal for want of the operator role
// in the command line's words: the command instead of the gRPC method,
// and, when the principal is no operator under mutual TLS, the flags that
// present an operator's certificate. Other errors are returned as they
// are.
func inCommandWords(err error, cmd *cobra.Command) error {
	if err == nil || cmd == nil || djinn.KindOf(err) != djinn.PermissionDenied {
		return err
	}
	msg := err.Error()
	at := roleRefused.FindStringSubmatchIndex(msg)
	if at == nil {
		return err
	}
	what := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	msg = msg[:at[0]] + what + " " + msg[at[2]:]
	if strings.Contains(msg, "[security] operators") {
		msg += ": run it with an operator's certificate (--tls-cert and --tls-key), or have this principal added to the operators"
	}
	return &djinn.Error{Kind: djinn.PermissionDenied, Message: msg}
}
