package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn/internal/principal"
)

// djinn tls: a lab certificate authority and the certificates a cluster
// needs, for trying TLS and mutual TLS. For production, use your own CA.
//
// The identity rule (shared with the peer authentication of the Raft
// port): a peer certificate carries a URI SAN djinn-peer://NODE-ID and a
// client certificate never does, so a peer cannot pass for a client nor a
// client for a peer. Server certificates name the hosts clients dial (DNS
// and IP SANs).

// tlsFlags are the flags every djinn tls command takes.
type tlsFlags struct {
	dir   string
	days  int
	force bool
}

// maxCertDays is the most --days: a certificate's expiry is written with
// a four-digit year, and 2,900,000 days from now stay before the year 9999.
const maxCertDays = 2_900_000

func (f *tlsFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dir, "dir", ".", "directory of the CA and the files written")
	cmd.Flags().IntVar(&f.days, "days", 365, "days the certificate is valid")
	cmd.Flags().BoolVar(&f.force, "force", false, "overwrite files that exist")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if f.days < 1 || f.days > maxCertDays {
			return usageError{fmt.Errorf("--days %d: want 1 to %d (a certificate valid for no day is expired when made)", f.days, maxCertDays)}
		}
		return nil
	}
}

func (g *globals) tlsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Make a lab CA and the server, client and peer certificates of a cluster",
		Long: "Make a certificate authority for a lab, and certificates it signs: a server certificate for the " +
			"client port (with the host names and addresses clients dial), client certificates (a name each, " +
			"for mutual TLS), and peer certificates (a node id each, as the URI SAN djinn-peer://NODE-ID, for " +
			"the Raft port). Keys are ECDSA P-256, written readable by their owner only. For production, use " +
			"your own certificate authority.\n\n" +
			"  djinn tls ca\n  djinn tls server --host localhost --host 127.0.0.1\n  djinn tls client alice\n  djinn tls peer n1\n" +
			"  djinn serve --node-id n1 --tls-cert server.pem --tls-key server-key.pem --tls-peer-cert peer-n1.pem \\\n" +
			"    --tls-peer-key peer-n1-key.pem --tls-ca ca.pem --tls-client-auth\n" +
			"  djinn status --tls-ca ca.pem --tls-cert client-alice.pem --tls-key client-alice-key.pem\n" +
			"  djinn tls revoke client-alice.pem    # crl.pem: serve --tls-crl crl.pem refuses it from then on",
	}
	cmd.AddCommand(g.tlsCACmd(), g.tlsServerCmd(), g.tlsClientCmd(), g.tlsPeerCmd(), g.tlsRevokeCmd())
	return cmd
}

// tlsWrittenView is what a djinn tls command wrote.
type tlsWrittenView struct {
	Cert    string   `json:"cert"`
	Key     string   `json:"key"`
	Subject string   `json:"subject"`
	SANs    []string `json:"sans"`
	Expires string   `json:"expires"`
	Use     string   `json:"use"` // how to use it
}

func (g *globals) printWritten(cmd *cobra.Command, v tlsWrittenView) error {
	return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
		fmt.Fprintf(w, "wrote %s and %s\nsubject  %s\n", v.Cert, v.Key, v.Subject)
		if len(v.SANs) > 0 {
			fmt.Fprintf(w, "names    %v\n", v.SANs)
		}
		fmt.Fprintf(w, "expires  %s\nuse      %s\n", v.Expires, v.Use)
	})
}

func (g *globals) tlsCACmd() *cobra.Command {
	var (
		f    tlsFlags
		name string
	)
	cmd := &cobra.Command{
		Use:   "ca [--name NAME] [--dir DIR]",
		Short: "Make a lab certificate authority: ca.pem and ca-key.pem",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tmpl := certTemplate(name, f.days)
			tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
			tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
			v, err := f.issue(tmpl, nil, nil, "ca")
			if err != nil {
				return err
			}
			v.Use = "the CA that signs the server, client and peer certificates: djinn serve and the clients take it as --tls-ca " + v.Cert
			return g.printWritten(cmd, v)
		},
	}
	f.register(cmd)
	cmd.Flags().Lookup("days").DefValue, f.days = "3650", 3650
	cmd.Flags().StringVar(&name, "name", "djinn lab CA", "the CA's common name")
	return cmd
}

func (g *globals) tlsServerCmd() *cobra.Command {
	var (
		f     tlsFlags
		hosts []string
		name  string
	)
	cmd := &cobra.Command{
		Use:   "server [--host H]… [--name FILE-NAME] [--dir DIR]",
		Short: "Make a server certificate for the client port, signed by the CA in --dir",
		Long: "Make a server certificate and key (FILE-NAME.pem, FILE-NAME-key.pem; server by default) for the " +
			"client port of djinn serve, naming every host clients dial: --host takes DNS names and IP addresses, " +
			"repeated for each member of a cluster behind one name or for a certificate shared by the members.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tmpl := certTemplate(hosts[0], f.days)
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			if err := addHosts(tmpl, hosts); err != nil {
				return err
			}
			v, err := f.issueSigned(tmpl, name)
			if err != nil {
				return err
			}
			v.Use = fmt.Sprintf("djinn serve --tls-cert %s --tls-key %s --tls-ca %s", v.Cert, v.Key, filepath.Join(f.dir, "ca.pem"))
			return g.printWritten(cmd, v)
		},
	}
	f.register(cmd)
	cmd.Flags().StringArrayVar(&hosts, "host", []string{"localhost", "127.0.0.1", "::1"}, "a DNS name or IP address clients dial (repeatable)")
	cmd.Flags().StringVar(&name, "name", "server", "file name of the certificate, without .pem")
	return cmd
}

func (g *globals) tlsClientCmd() *cobra.Command {
	var f tlsFlags
	cmd := &cobra.Command{
		Use:   "client NAME [--dir DIR]",
		Short: "Make a client certificate for mutual TLS: the client's identity is NAME",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCertName("NAME", args[0]); err != nil {
				return err
			}
			tmpl := certTemplate(args[0], f.days)
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
			v, err := f.issueSigned(tmpl, "client-"+args[0])
			if err != nil {
				return err
			}
			v.Use = fmt.Sprintf("djinn status --tls-ca %s --tls-cert %s --tls-key %s", filepath.Join(f.dir, "ca.pem"), v.Cert, v.Key)
			return g.printWritten(cmd, v)
		},
	}
	f.register(cmd)
	return cmd
}

func (g *globals) tlsPeerCmd() *cobra.Command {
	var (
		f     tlsFlags
		hosts []string
	)
	cmd := &cobra.Command{
		Use:   "peer NODE-ID [--host H]… [--dir DIR]",
		Short: "Make a peer certificate for the Raft port: its identity is djinn-peer://NODE-ID",
		Long: "Make the certificate a member presents to the other members on the Raft port: it names the node " +
			"by the URI SAN djinn-peer://NODE-ID, which no client certificate carries, and the hosts the other " +
			"members dial it at (--host).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkCertName("NODE-ID", args[0]); err != nil {
				return err
			}
			tmpl := certTemplate(args[0], f.days)
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
			tmpl.URIs = []*url.URL{{Scheme: principal.PeerScheme, Host: args[0]}}
			if err := addHosts(tmpl, hosts); err != nil {
				return err
			}
			v, err := f.issueSigned(tmpl, "peer-"+args[0])
			if err != nil {
				return err
			}
			v.Use = fmt.Sprintf("djinn serve --node-id %s --tls-peer-cert %s --tls-peer-key %s (the node's certificate on the Raft port and in its calls to others)", args[0], v.Cert, v.Key)
			return g.printWritten(cmd, v)
		},
	}
	f.register(cmd)
	cmd.Flags().StringArrayVar(&hosts, "host", []string{"localhost", "127.0.0.1", "::1"}, "a DNS name or IP address the other members dial (repeatable)")
	return cmd
}

// certName is what a client name or node id may be: it becomes a file name
// and a URI host.
var certName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

func checkCertName(what, s string) error {
	if !certName.MatchString(s) {
		return usageError{fmt.Errorf("%s %q: want letters, digits, dots, dashes and underscores, up to 63", what, s)}
	}
	return nil
}

// dnsName is a DNS name a certificate may carry (a wildcard first label
// included).
var dnsName = regexp.MustCompile(`^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// certTemplate is a certificate named cn, valid from a minute ago for days.
func certTemplate(cn string, days int) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"djinn lab"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.AddDate(0, 0, days),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

// addHosts puts hosts in tmpl as DNS names or IP addresses.
func addHosts(tmpl *x509.Certificate, hosts []string) error {
	if len(hosts) == 0 {
		return usageError{errors.New("--host: missing: name the hosts the certificate is for")}
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			continue
		}
		if len(h) > 253 || !dnsName.MatchString(h) {
			return usageError{fmt.Errorf("--host %q: neither an IP address nor a DNS name", h)}
		}
		tmpl.DNSNames = append(tmpl.DNSNames, h)
	}
	return nil
}

// issueSigned signs tmpl with the CA in the directory and writes it as
// name.pem and name-key.pem.
func (f *tlsFlags) issueSigned(tmpl *x509.Certificate, name string) (tlsWrittenView, error) {
	ca, caKey, err := f.loadCA()
	if err != nil {
		return tlsWrittenView{}, err
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	return f.issue(tmpl, ca, caKey, name)
}

// loadCA reads ca.pem and ca-key.pem from the directory.
func (f *tlsFlags) loadCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(filepath.Join(f.dir, "ca.pem"))
	if err != nil {
		return nil, nil, fmt.Errorf("the CA: %w (djinn tls ca --dir %s makes one)", err, f.dir)
	}
	keyPEM, err := os.ReadFile(filepath.Join(f.dir, "ca-key.pem"))
	if err != nil {
		return nil, nil, fmt.Errorf("the CA's key: %w", err)
	}
	cb, kb := pemBlock(certPEM, "CERTIFICATE"), pemBlock(keyPEM, "EC PRIVATE KEY")
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%s: not the PEM certificate and EC key djinn tls ca writes", f.dir)
	}
	ca, err := x509.ParseCertificate(cb)
	if err != nil {
		return nil, nil, fmt.Errorf("ca.pem: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb)
	if err != nil {
		return nil, nil, fmt.Errorf("ca-key.pem: %w", err)
	}
	return ca, key, nil
}

func pemBlock(b []byte, typ string) []byte {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil
		}
		if blk.Type == typ {
			return blk.Bytes
		}
	}
}

// issue makes a key, signs tmpl with caKey as ca (itself when ca is nil)
// and writes name.pem and name-key.pem.
func (f *tlsFlags) issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string) (tlsWrittenView, error) {
	certPath, keyPath := filepath.Join(f.dir, name+".pem"), filepath.Join(f.dir, name+"-key.pem")
	if err := f.free(certPath, keyPath); err != nil {
		return tlsWrittenView{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tlsWrittenView{}, err
	}
	if ca == nil {
		ca, caKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tlsWrittenView{}, fmt.Errorf("sign %s: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tlsWrittenView{}, err
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return tlsWrittenView{}, err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return tlsWrittenView{}, err
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tlsWrittenView{}, err
	}
	return tlsWrittenView{Cert: certPath, Key: keyPath, Subject: tmpl.Subject.CommonName, SANs: sanList(tmpl),
		Expires: tmpl.NotAfter.UTC().Format(time.RFC3339)}, nil
}

// free refuses to overwrite files unless --force.
func (f *tlsFlags) free(paths ...string) error {
	if f.force {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s: exists; --force overwrites it", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func sanList(c *x509.Certificate) []string {
	out := append([]string{}, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	return out
}
