package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/discovery"
)

// A client that cannot connect is told why, when a look at the port
// tells: a TLS port dialled without TLS, a plaintext port dialled with it,
// a port that wants a client certificate, the admin port, which speaks
// HTTP (as another web server does, told apart), a discovery port, which names the gRPC port, or a port that does
// not speak gRPC at all (the raft port). gRPC alone only reports what
// broke on the wire.

// probeWait bounds each look at the port.
const probeWait = 2 * time.Second

// connectionFailure reports whether err is a failure to connect or to
// speak gRPC, which a look at the port may explain.
func connectionFailure(err error) bool {
	switch djinn.KindOf(err) {
	case djinn.Unavailable, djinn.Internal:
	default:
		return false // the server answered: whatever it said, the port is right
	}
	s := err.Error()
	for _, sign := range []string{"cannot connect", "connection error", "dial tcp", "connection refused", "server preface", "broken pipe", "connection reset",
		"tls:", "first record does not look like a TLS handshake"} {
		if strings.Contains(s, sign) {
			return true
		}
	}
	return false
}

// diagnose returns err with its cause and the next step in front, when
// err is a failure to reach --server's first address and a look at it
// tells them; err otherwise.
func (g *globals) diagnose(ctx context.Context, err error) error {
	if g.server == "" || !connectionFailure(err) {
		return err
	}
	eps, perr := client.SplitEndpoints(g.server)
	if perr != nil || len(eps) == 0 {
		return err
	}
	addr := eps[0]
	if !strings.Contains(err.Error(), addr) {
		return err // another address failed (a --locator, --to, a listener): --server is not to blame
	}
	if why := g.probe(ctx, addr, err); why != "" {
		return fmt.Errorf("%s: %s (%w)", addr, why, err)
	}
	return err
}

// probe looks at addr, which failed with err, and says what is wrong with
// dialling it as configured, or "".
func (g *globals) probe(ctx context.Context, addr string, err error) string {
	tlsPort, asksCert, tlsErr := probeTLS(ctx, addr)
	if why := unreachable(tlsErr, "--server or DJINN_SERVER", "start a server (djinn serve), or name a running one with --server or DJINN_SERVER"); why != "" {
		return why
	}
	switch httpPort, admin := probeHTTP(ctx, addr, tlsPort); {
	case admin:
		return "this is djinn's admin port (HTTP: the console, /healthz, /readyz, /metrics): dial the gRPC port instead, djinn serve's --listen (127.0.0.1:4161 by default)"
	case httpPort:
		return "this port speaks HTTP, not gRPC (a web server, not a djinn server): dial a djinn server's gRPC port, djinn serve's --listen (127.0.0.1:4161 by default)"
	}
	if !tlsPort {
		if grpc, ok := probeDiscovery(ctx, addr); ok {
			return "this is a lookup service's unicast discovery port (djinn serve's --discovery): its gRPC port is " + grpc + ", dial that (--server " + grpc + ")"
		}
	}
	withTLS := g.tlsCA != "" || g.cert != ""
	if tlsPort && withTLS && strings.Contains(err.Error(), "certificate signed by unknown authority") {
		return "its certificate is not signed by the CA in --tls-ca " + g.tlsCA + ": give the CA that signed it (the --tls-ca its djinn serve was given)"
	}
	if !tlsPort && !withTLS && strings.Contains(err.Error(), "server preface") {
		return "this port does not speak gRPC (djinn serve's --raft port, or another program's): dial the gRPC port, djinn serve's --listen (127.0.0.1:4161 by default)"
	}
	switch {
	case tlsPort && !withTLS:
		return "this port speaks TLS: give --tls-ca with the CA that signed its certificate (djinn tls ca makes a lab one)" + certHint(asksCert)
	case tlsPort && asksCert && g.cert == "":
		return "this port asks for a client certificate (mutual TLS): give --tls-cert and --tls-key (djinn tls client NAME makes one)"
	case tlsPort && g.cert != "":
		return g.probeClientCert(ctx, addr)
	case tlsPort:
		return ""
	}
	if withTLS && tlsErr != nil && strings.Contains(tlsErr.Error(), "does not look like a TLS handshake") {
		return "this port does not speak TLS: drop --tls-ca, --tls-cert and --tls-key, or dial the server's TLS port"
	}
	return ""
}

// unreachable says why a look at a port failed with err when no server
// is there to answer: its host's name does not resolve (check it in
// flag), or nothing listens (next says what to do); "" otherwise.
func unreachable(err error, flag, next string) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Sprintf("cannot resolve host %s: check the name in %s", dns.Name, flag)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "nothing listens there: " + next
	}
	return ""
}

// diagnoseManager returns err with its cause and the next step in front,
// when err is a failure to reach the transaction manager that --manager
// names (its server joins the transaction there) and a look at its
// endpoint tells them; err otherwise.
func diagnoseManager(ctx context.Context, manager djinn.Ref, err error) error {
	if err == nil {
		return nil
	}
	// gRPC's words for a host that does not resolve do not name it: the
	// server did reach --server, so its failure to resolve was the manager's.
	resolver := djinn.KindOf(err) == djinn.Unavailable && strings.Contains(err.Error(), "name resolver error")
	if !resolver && (!connectionFailure(err) || !strings.Contains(err.Error(), manager.Endpoint)) {
		return err
	}
	_, _, probeErr := probeTLS(ctx, manager.Endpoint)
	why := unreachable(probeErr, "--manager", "start the server of that transaction manager, or give a running one's reference with --manager (djinn txn create prints it)")
	if why == "" {
		return err
	}
	return fmt.Errorf("--manager %s: the transaction manager at %s cannot be reached: %s (%w)", manager, manager.Endpoint, why, err)
}

func certHint(asksCert bool) string {
	if asksCert {
		return ", and --tls-cert and --tls-key: it asks for a client certificate (mutual TLS)"
	}
	return ""
}

// probeClientCert says why the TLS port addr refuses the client
// certificate of --tls-cert, or "" when it takes it: under TLS 1.3 a
// server refuses one after the client's handshake is done, so the client
// sees the refusal only as its first read or write fails (gRPC: a broken
// pipe). A gRPC server speaks first (its settings), so a read tells.
func (g *globals) probeClientCert(ctx context.Context, addr string) string {
	cfg, err := g.tlsConfig()
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	cfg.InsecureSkipVerify = true // a look at the port: the server's certificate is not what is asked
	cfg.NextProtos = []string{"h2"}
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err == nil {
		defer conn.Close()
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetReadDeadline(dl)
		}
		_, err = conn.Read(make([]byte, 1))
	}
	if err == nil || !strings.Contains(err.Error(), "remote error: tls:") {
		return ""
	}
	why := strings.TrimPrefix(err.Error(), "remote error: ")
	next := "give one signed by the CA the server trusts, its --tls-ca (djinn tls client NAME --dir THAT-CA's-DIR makes one)"
	if strings.Contains(why, "expired") {
		next = "it has expired: make a new one (djinn tls client NAME --force)"
	}
	return "it refuses the client certificate --tls-cert " + g.cert + " (" + why + "): " + next
}

// probeTLS says whether addr completes a TLS handshake (whoever signed its
// certificate), and whether it asked for a client certificate.
func probeTLS(ctx context.Context, addr string) (tlsPort, asksCert bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{
		InsecureSkipVerify: true, // a look at the port, nothing is sent: whose certificate it is does not matter
		NextProtos:         []string{"h2"},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			asksCert = true
			return &tls.Certificate{}, nil
		},
	}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		var rec tls.RecordHeaderError
		if errors.As(err, &rec) {
			return false, false, err
		}
		return false, asksCert, err
	}
	conn.Close()
	return true, asksCert, nil
}

// probeHTTP says whether addr answers HTTP/1.1, and whether as djinn's
// admin port does (its /healthz: 200 "ok", or 503 "stopped: ..."): over
// TLS when the port speaks it (under TLS the admin port does). It speaks
// the request itself, on a connection of its own, rather than through an
// http.Client, which would log what a gRPC port answers.
func probeHTTP(ctx context.Context, addr string, overTLS bool) (httpPort, admin bool) {
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	var (
		conn net.Conn
		err  error
	)
	if overTLS {
		d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}} // a look at the port: whose certificate it is does not matter
		conn, err = d.DialContext(ctx, "tcp", addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return false, false
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: djinn\r\nConnection: close\r\n\r\n"); err != nil {
		return false, false
	}
	r := bufio.NewReader(io.LimitReader(conn, 8<<10))
	if head, err := r.Peek(len("HTTP/1.")); err != nil || string(head) != "HTTP/1." {
		return false, false
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return true, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if !overTLS && resp.StatusCode == http.StatusBadRequest && strings.Contains(string(body), "HTTP request to an HTTPS server") {
		// An HTTPS port that offers no h2, as the admin port under TLS:
		// ask it again over TLS.
		if _, admin := probeHTTP(ctx, addr, true); admin {
			return true, true
		}
		return true, false
	}
	switch {
	case resp.StatusCode == http.StatusOK && string(body) == "ok\n",
		resp.StatusCode == http.StatusServiceUnavailable && strings.HasPrefix(string(body), "stopped: "):
		return true, true
	}
	return true, false
}

// probeDiscovery asks addr for unicast discovery, as a lookup service's
// discovery port answers it, and returns the gRPC endpoint it names.
func probeDiscovery(ctx context.Context, addr string) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", false
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	resp, err := discovery.RequestUnicast(conn, 64<<10)
	if err != nil || resp.Endpoint == "" {
		return "", false
	}
	return resp.Endpoint, true
}
