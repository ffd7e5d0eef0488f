package main

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
)

// runNoServer runs djinn with args and no --server, and returns its
// stdout, stderr and whether it succeeded.
func runNoServer(t *testing.T, args ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command(djinnBinary(t), args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCLITLS: djinn tls makes a CA and the certificates it signs; a peer
// carries djinn-peer://NODE-ID and a client does not; keys are readable by
// their owner only; files are not overwritten without --force.
func TestCLITLS(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"ca"}, {"server", "--host", "localhost", "--host", "127.0.0.1"}, {"client", "alice"}, {"peer", "n1", "--host", "10.0.0.5"}} {
		if _, errs, ok := runNoServer(t, append(append([]string{"tls"}, args...), "--dir", dir)...); !ok {
			t.Fatalf("djinn tls %v: %s", args, errs)
		}
	}
	ca := readCert(t, filepath.Join(dir, "ca.pem"))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for name, usage := range map[string]x509.ExtKeyUsage{"server": x509.ExtKeyUsageServerAuth, "client-alice": x509.ExtKeyUsageClientAuth, "peer-n1": x509.ExtKeyUsageClientAuth} {
		c := readCert(t, filepath.Join(dir, name+".pem"))
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("%s: not signed by the CA for its use: %v", name, err)
		}
		if fi, err := os.Stat(filepath.Join(dir, name+"-key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s's key: %v %v, want mode 0600", name, fi.Mode(), err)
		}
	}
	server, client, peer := readCert(t, filepath.Join(dir, "server.pem")), readCert(t, filepath.Join(dir, "client-alice.pem")), readCert(t, filepath.Join(dir, "peer-n1.pem"))
	if strings.Join(server.DNSNames, ",") != "localhost" || len(server.IPAddresses) != 1 || len(server.URIs) != 0 {
		t.Errorf("server names %v %v %v", server.DNSNames, server.IPAddresses, server.URIs)
	}
	if client.Subject.CommonName != "alice" || len(client.URIs) != 0 {
		t.Errorf("client: %s %v: a client carries no peer identity", client.Subject.CommonName, client.URIs)
	}
	if len(peer.URIs) != 1 || peer.URIs[0].String() != "djinn-peer://n1" || peer.IPAddresses[0].String() != "10.0.0.5" {
		t.Errorf("peer: %v %v, want djinn-peer://n1 and its address", peer.URIs, peer.IPAddresses)
	}
	if _, errs, ok := runNoServer(t, "tls", "client", "alice", "--dir", dir); ok || !strings.Contains(errs, "exists; --force overwrites it") {
		t.Errorf("a second client alice: ok=%v %s", ok, errs)
	}
	if _, errs, ok := runNoServer(t, "tls", "client", "../x", "--dir", dir); ok || !strings.Contains(errs, `NAME "../x"`) {
		t.Errorf("a client named ../x: ok=%v %s", ok, errs)
	}
	if _, errs, ok := runNoServer(t, "tls", "server", "--dir", t.TempDir()); ok || !strings.Contains(errs, "djinn tls ca --dir") {
		t.Errorf("a server certificate without a CA: ok=%v %s", ok, errs)
	}
	testTLSServer(t, dir)
}

// testTLSServer serves with the certificates, mutual TLS on: a client with
// its certificate is served; one that dials in plaintext, without a
// client certificate, or at the admin port is told what to give.
func testTLSServer(t *testing.T, dir string) {
	if _, errs, ok := runNoServer(t, "tls", "peer", "lab1", "--dir", dir); !ok {
		t.Fatalf("djinn tls peer lab1: %s", errs)
	}
	n := newNode(t)
	config := filepath.Join(dir, "djinn.toml") // bob is an operator
	if err := os.WriteFile(config, []byte("[security]\noperators = [\"cn:bob\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := n.start(t, "--config", config, "--tls-cert", filepath.Join(dir, "server.pem"), "--tls-key", filepath.Join(dir, "server-key.pem"),
		"--tls-peer-cert", filepath.Join(dir, "peer-lab1.pem"), "--tls-peer-key", filepath.Join(dir, "peer-lab1-key.pem"),
		"--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-client-auth")
	defer p.stop(t)
	tlsArgs := []string{"--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-cert", filepath.Join(dir, "client-alice.pem"), "--tls-key", filepath.Join(dir, "client-alice-key.pem")}
	other := t.TempDir() // another lab's CA, and a client certificate it signed
	for _, args := range [][]string{{"ca"}, {"client", "eve"}} {
		if _, errs, ok := runNoServer(t, append(append([]string{"tls"}, args...), "--dir", other)...); !ok {
			t.Fatalf("djinn tls %v: %s", args, errs)
		}
	}
	if out, errs, ok := run(t, p, append([]string{"status"}, tlsArgs...)...); !ok || !strings.Contains(out, "Leader") {
		t.Fatalf("status over mutual TLS: %s %s", out, errs)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"plaintext", []string{"status"}, "this port speaks TLS: give --tls-ca"},
		{"no client certificate", []string{"status", "--tls-ca", filepath.Join(dir, "ca.pem")}, "asks for a client certificate (mutual TLS): give --tls-cert and --tls-key"},
		{"the admin port", []string{"status", "--server", n.admin}, "this is djinn's admin port"},
		{"the admin port, with TLS", append([]string{"status", "--server", n.admin}, tlsArgs...), "this is djinn's admin port"},
		{"another CA", []string{"status", "--tls-ca", filepath.Join(other, "ca.pem")}, "its certificate is not signed by the CA in --tls-ca " + filepath.Join(other, "ca.pem")},
		{"a client certificate of another CA", []string{"status", "--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-cert", filepath.Join(other, "client-eve.pem"), "--tls-key", filepath.Join(other, "client-eve-key.pem")},
			"it refuses the client certificate --tls-cert " + filepath.Join(other, "client-eve.pem") + " (tls: unknown certificate authority): give one signed by the CA the server trusts"},
	} {
		args := tc.args
		if len(args) == 1 || args[1] != "--server" {
			args = append(args, "--server", p.addr)
		}
		_, errs, ok := runNoServer(t, args...)
		if ok || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s: ok=%v stderr %q, want one line saying %q", tc.name, ok, errs, tc.want)
		}
	}
	lsRedacted(t, p, dir, tlsArgs)
	// The old names still work, for one release, saying so.
	out, errs, ok := run(t, p, "status", "--ca", filepath.Join(dir, "ca.pem"), "--cert", filepath.Join(dir, "client-alice.pem"), "--key", filepath.Join(dir, "client-alice-key.pem"))
	if !ok || !strings.Contains(out, "Leader") || !strings.Contains(errs, "--ca is an old name: use --tls-ca") {
		t.Errorf("status with the old flag names: ok=%v %q %q, want it served and a notice", ok, out, errs)
	}
}

// lsRedacted: an operator (bob, by the configuration) lists alice's
// mailbox registration with --all redacted — whose it is and its time
// left, but not its id (a capability: its fingerprint stands for it) nor
// its lease's cookie; the help says so.
func lsRedacted(t *testing.T, p *proc, dir string, alice []string) {
	t.Helper()
	if _, errs, ok := runNoServer(t, "tls", "client", "bob", "--dir", dir); !ok {
		t.Fatalf("djinn tls client bob: %s", errs)
	}
	bob := []string{"--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-cert", filepath.Join(dir, "client-bob.pem"), "--tls-key", filepath.Join(dir, "client-bob-key.pem")}
	var reg mailboxRegJSON
	if err := json.Unmarshal([]byte(mustRun(t, p, append([]string{"mailbox", "register", "--lease", "10m", "-o", "json"}, alice...)...)), &reg); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, p, append([]string{"ls", "mailboxes", "--all", "-o", "json"}, bob...)...)
	var page lsJSON
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Resources) != 1 {
		t.Fatalf("ls mailboxes --all: %s (%v), want alice's registration", out, err)
	}
	r := page.Resources[0]
	id, err := djinn.ParseID(reg.ID)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(id[:])
	if fp := hex.EncodeToString(sum[:8]); r["name"] != fp || r["principal"] != "cn:alice" || r["redacted"] != true || r["lease"] != "(redacted)" || r["remaining"] == nil {
		t.Errorf("alice's registration as an operator lists it: %v; want its fingerprint %s, her principal, redacted, its time left", r, fp)
	}
	if cookie := reg.Lease.Token; strings.Contains(out, reg.ID) || cookie == "" || strings.Contains(out, reg.Lease.Name) {
		t.Errorf("an operator's listing shows alice's capabilities:\n%s", out)
	}
	if help := mustRun(t, p, "ls", "--help"); !strings.Contains(help, "Another principal's resources are shown to an operator redacted") {
		t.Errorf("ls --help does not say an operator sees others' resources redacted:\n%s", help)
	}
}
