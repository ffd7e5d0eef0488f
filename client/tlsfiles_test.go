package client

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/testpki"
)

// TestTLSFilesFollowRenewals: with WithTLSFiles a client presents the
// certificate its files hold when a connection is made, and trusts the CA
// bundle they hold then: a renewal of either is followed by the next
// connection, with no new option (README "Using djinn from Go").
func TestTLSFilesFollowRenewals(t *testing.T) {
	t.Parallel()
	pki, pki2 := testpki.NewPKI(t), testpki.NewPKI(t)
	dir := t.TempDir()
	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	stamp := time.Unix(1_700_000_000, 0)
	put := func(path string, data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		stamp = stamp.Add(time.Second) // each write a time of its own
		if err := os.Chtimes(path, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	put(ca, readPEM(t, pki.CA))
	put(cert, readPEM(t, pki.ClientCert))
	put(key, readPEM(t, pki.ClientKey))
	opt := WithTLSFiles(ca, cert, key)

	// A listener that takes client certificates of either CA and records
	// the serial of each it takes.
	var presented atomic.Pointer[string]
	roots := pki.Roots.Clone()
	roots.AppendCertsFromPEM(readPEM(t, pki2.CA))
	listenerTLS := func(server tls.Certificate) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{server}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert,
			MinVersion: tls.VersionTLS12, VerifyConnection: func(cs tls.ConnectionState) error {
				s := cs.PeerCertificates[0].SerialNumber.String()
				presented.Store(&s)
				return nil
			}}
	}
	var rec recorder
	l := startListener(t, rec.notify, WithServerTLS(listenerTLS(pki.Server)))
	// notify sends an event on a connection of its own: a new pool.
	notify := func(l *Listener, opts ...Option) error {
		p := NewPool(opts...)
		defer p.Close()
		return Notify(t.Context(), p, l.Ref(), testEvent(1, "tls files"))
	}
	if err := notify(l, opt); err != nil {
		t.Fatalf("notify with the files: %v", err)
	}
	if got := *presented.Load(); got != pki.Client.Leaf.SerialNumber.String() {
		t.Errorf("presented serial %s, want the client certificate's %s", got, pki.Client.Leaf.SerialNumber)
	}

	// The client certificate renewed in place.
	renewed := pki.NewClient(t, "djinn test client")
	put(key, readPEM(t, filepath.Join(filepath.Dir(pki.ClientCert), "client-1-key.pem")))
	put(cert, readPEM(t, filepath.Join(filepath.Dir(pki.ClientCert), "client-1.pem")))
	if err := notify(l, opt); err != nil {
		t.Fatalf("notify after the renewal: %v", err)
	}
	if got := *presented.Load(); got != renewed.Leaf.SerialNumber.String() {
		t.Errorf("presented serial %s after the renewal, want %s", got, renewed.Leaf.SerialNumber)
	}

	// A listener whose certificate a second CA signed: trusted once the
	// bundle holds that CA.
	l2 := startListener(t, rec.notify, WithServerTLS(listenerTLS(pki2.Server)))
	if err := notify(l2, opt); err == nil {
		t.Fatal("a listener of a CA the bundle does not hold was trusted")
	}
	put(ca, append(readPEM(t, pki.CA), readPEM(t, pki2.CA)...))
	if err := notify(l2, opt); err != nil {
		t.Fatalf("notify to a listener of the CA added to the bundle: %v", err)
	}

	// A renewal gone wrong (the key of another certificate): the renewed
	// certificate stays in use.
	put(key, readPEM(t, pki.ServerKey))
	if err := notify(l, opt); err != nil {
		t.Fatalf("notify after a bad renewal: %v", err)
	}
	if got := *presented.Load(); got != renewed.Leaf.SerialNumber.String() {
		t.Errorf("presented serial %s after a bad renewal, want the renewed %s still", got, renewed.Leaf.SerialNumber)
	}
}

// TestTLSFilesRefused: files that cannot be used fail each connection
// naming the file and the cause; the option's own mistake names the
// values.
func TestTLSFilesRefused(t *testing.T) {
	t.Parallel()
	pki := testpki.NewPKI(t)
	serverTLS, _ := mutualTLS(t)
	var rec recorder
	l := startListener(t, rec.notify, WithServerTLS(serverTLS))
	missing := filepath.Join(t.TempDir(), "gone.pem")
	tests := []struct {
		name string
		opt  Option
		want []string
	}{
		{"a CA file missing", WithTLSFiles(missing, pki.ClientCert, pki.ClientKey), []string{missing, "no such file"}},
		{"a key that is not the certificate's", WithTLSFiles(pki.CA, pki.ClientCert, pki.ServerKey), []string{pki.ClientCert, pki.ServerKey, "does not match"}},
		{"a certificate without a key", WithTLSFiles(pki.CA, pki.ClientCert, ""), []string{pki.ClientCert, "give both"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPool(tt.opt)
			defer p.Close()
			err := Notify(t.Context(), p, l.Ref(), testEvent(1, "refused"))
			if err == nil {
				t.Fatal("notify succeeded")
			}
			var de *djinn.Error
			if !errors.As(err, &de) {
				t.Errorf("error %v (%T): want a djinn error", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func readPEM(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
