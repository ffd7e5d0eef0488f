package main

import (
	"errors"
	"testing"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
)

// TestRoleRefusalInCommandWords: a server's refusal for want of the
// operator role names the command typed, not the gRPC method it called,
// keeps the server's next step, adds the certificate flags under mutual
// TLS, and stays PermissionDenied; other errors are left as they are.
func TestRoleRefusalInCommandWords(t *testing.T) {
	root := &cobra.Command{Use: "djinn"}
	snapshot := &cobra.Command{Use: "snapshot"}
	save := &cobra.Command{Use: "save FILE"}
	root.AddCommand(snapshot)
	snapshot.AddCommand(save)
	for _, row := range []struct {
		name string
		err  error
		want string
	}{
		{"join secret", djinn.Errorf(djinn.PermissionDenied, "/djinn.v1.Admin/SaveSnapshot needs the operator role: present the cluster's join secret (the join-secret file in the data directory of its first node; djinn --join-secret-file FILE)"),
			"snapshot save needs the operator role: present the cluster's join secret (the join-secret file in the data directory of its first node; djinn --join-secret-file FILE)"},
		{"mutual TLS", djinn.Errorf(djinn.PermissionDenied, `/djinn.v1.Admin/SaveSnapshot needs the operator role: principal "CN=app" is not among the [security] operators of the server's configuration`),
			`snapshot save needs the operator role: principal "CN=app" is not among the [security] operators of the server's configuration: run it with an operator's certificate (--tls-cert and --tls-key), or have this principal added to the operators`},
		{"peer", djinn.Errorf(djinn.PermissionDenied, "/djinn.v1.Members/Add is for the cluster's servers and operators: present the cluster's join secret (--join-secret-file)"),
			"snapshot save is for the cluster's servers and operators: present the cluster's join secret (--join-secret-file)"},
		{"another refusal", djinn.Errorf(djinn.PermissionDenied, "the console needs a client certificate"), "the console needs a client certificate"},
		{"another kind", djinn.Errorf(djinn.Unavailable, "/djinn.v1.Admin/SaveSnapshot needs the operator role: x"), "/djinn.v1.Admin/SaveSnapshot needs the operator role: x"},
	} {
		t.Run(row.name, func(t *testing.T) {
			got := inCommandWords(row.err, save)
			if got.Error() != row.want {
				t.Errorf("got  %q\nwant %q", got, row.want)
			}
			if !errors.Is(got, djinn.KindOf(row.err)) {
				t.Errorf("%v: kind %s, want %s", got, djinn.KindOf(got), djinn.KindOf(row.err))
			}
		})
	}
}
