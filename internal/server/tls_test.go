package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestMutualTLS: with a certificate, a key, a CA and client-auth, the
// client port serves only clients whose certificate the CA signed
// (DESIGN.md 7), and the mailbox delivers to listeners over mutual TLS.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
	srv := servertest.Start(t, cfg)

	t.Run("a client with a certificate the CA signed is served", func(t *testing.T) {
		c := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.ClientTLS()))
		reg, err := c.Mailbox().Register(testContext(t), time.Minute)
		if err != nil {
			t.Fatalf("register over mutual TLS: %v", err)
		}
		if err := reg.Lease.Renew(testContext(t), c, djinn.Any); err != nil {
			t.Fatalf("renew over mutual TLS: %v", err)
		}

		// The listener asks for a client certificate too: the server's
		// own certificate is what it presents when it delivers.
		events := make(chan *client.RemoteEvent, 1)
		l, err := client.Listen(t.Context(), "127.0.0.1:0", func(_ context.Context, ev *client.RemoteEvent) error {
			events <- ev
			return nil
		}, client.WithServerTLS(&tls.Config{
			Certificates: []tls.Certificate{pki.Server}, ClientCAs: pki.Roots,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := reg.EnableDelivery(testContext(t), l.Ref()); err != nil {
			t.Fatal(err)
		}
		sent := newGenerator(c).mustNotify(t, reg.Listener, 7)
		select {
		case got := <-events:
			if got.ID != sent.ID || got.Seq != sent.Seq {
				t.Errorf("delivered event %d seq %d, want %d seq %d", got.ID, got.Seq, sent.ID, sent.Seq)
			}
		case <-time.After(servertest.Timeout):
			t.Fatal("no event delivered over mutual TLS")
		}
	})

	t.Run("DESIGN.md 7 another principal's registration does not exist for it", func(t *testing.T) {
		alice := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.ClientTLS()))
		bob := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "bob"))))
		reg, err := alice.Mailbox().Register(testContext(t), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// bob has learnt alice's registration id.
		asBob := djinnpb.NewEventMailboxClient(bob.ClientConn())
		id := &djinnpb.MailboxRegistrationRequest{RegistrationId: idBytes(reg.ID)}
		_, err = asBob.GetRegistration(testContext(t), id)
		wantErr(t, "bob reads alice's registration", err, djinn.ErrNoSuchObject, "")
		_, err = asBob.DisableDelivery(testContext(t), id)
		wantErr(t, "bob disables alice's delivery", err, djinn.ErrNoSuchObject, "")
		_, err = asBob.Ack(testContext(t), &djinnpb.AckRequest{RegistrationId: idBytes(reg.ID), ThroughIndex: 1})
		wantErr(t, "bob acknowledges alice's events", err, djinn.ErrNoSuchObject, "")
		if _, err := alice.Mailbox().Registration(testContext(t), reg.ID); err != nil {
			t.Errorf("alice reads her registration: %v", err)
		}
		// A lease cookie is a capability: whoever holds it may renew.
		if err := reg.Lease.Renew(testContext(t), bob, djinn.Any); err != nil {
			t.Errorf("bob renews alice's lease with its cookie: %v", err)
		}
	})

	other := servertest.NewPKI(t)
	tests := []struct {
		name string
		opts []client.Option
	}{
		{"a plaintext client is refused", nil},
		{"a client without a certificate is refused", []client.Option{client.WithTLS(&tls.Config{RootCAs: pki.Roots, MinVersion: tls.VersionTLS12})}},
		{"a client certificate another CA signed is refused", []client.Option{client.WithTLS(&tls.Config{
			Certificates: []tls.Certificate{other.Client}, RootCAs: pki.Roots, MinVersion: tls.VersionTLS12,
		})}},
		{"a client that does not trust the server's CA does not talk to it", []client.Option{client.WithTLS(&tls.Config{
			Certificates: []tls.Certificate{pki.Client}, RootCAs: other.Roots, MinVersion: tls.VersionTLS12,
		})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
			defer cancel()
			c, err := client.Dial(ctx, srv.Addr(), tt.opts...)
			if err == nil {
				// TLS 1.3 finishes the client's side of the handshake
				// before the server checks the client's certificate: then
				// the first call fails.
				defer c.Close()
				_, err = djinnpb.NewAdminClient(c.ClientConn()).Status(ctx, &djinnpb.StatusRequest{})
				if err == nil {
					t.Fatal("served")
				}
			}
			if !errors.Is(err, djinn.ErrUnavailable) {
				t.Errorf("refused with %v, want unavailable", err)
			}
		})
	}
}

// TestTLSFiles: certificate files that cannot be used stop Open with an
// error naming them.
func TestTLSFiles(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	tests := []struct {
		name string
		tls  server.TLSConfig
		text string
	}{
		{"a missing certificate file", server.TLSConfig{Cert: pki.CA + ".missing", Key: pki.ServerKey, CA: pki.CA}, ".missing"},
		{"a key that does not match the certificate", server.TLSConfig{Cert: pki.ServerCert, Key: pki.ClientKey, CA: pki.CA}, pki.ClientKey},
		{"a missing CA file", server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA + ".gone"}, ".gone"},
		{"a peer key that does not match the peer certificate", server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, PeerCert: pki.ServerCert, PeerKey: pki.ClientKey}, pki.ClientKey},
		{"a CA file without certificates", server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.ServerKey, ClientAuth: true}, pki.ServerKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := servertest.Config(t)
			cfg.TLS = tt.tls
			s, err := server.Open(testContext(t), cfg, nil)
			if err == nil {
				s.Close()
			}
			wantErr(t, "open", err, djinn.ErrInvalidArgument, tt.text)
		})
	}
}
