package main

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
)

// crlName is the lab CA's revocation list, beside ca.pem.
const crlName = "crl.pem"

// tlsRevokedView is what djinn tls revoke wrote.
type tlsRevokedView struct {
	CRL        string   `json:"crl"`
	Revoked    []string `json:"revoked"` // every serial the list holds, in hex
	Added      []string `json:"added"`   // the serials this command added
	NextUpdate string   `json:"next_update"`
	Use        string   `json:"use"`
}

func (g *globals) tlsRevokeCmd() *cobra.Command {
	var f tlsFlags
	cmd := &cobra.Command{
		Use:   "revoke [CERT-FILE]… [--dir DIR]",
		Short: "Revoke certificates the lab CA signed: list them in its revocation list, crl.pem",
		Long: "Add the certificates in the files named to the lab CA's revocation list (crl.pem beside ca.pem), " +
			"signed by the CA, keeping those it lists already; with no file, write the list again with a fresh " +
			"next update (--days from now). A server started with --tls-crl crl.pem refuses a listed certificate " +
			"on every call, its open connections included, once it has read the list again (at its next TLS " +
			"handshake, or within a minute). The list is replaced whole (written beside it, then renamed), so a " +
			"server never reads half of it.",
		Example: "  djinn tls revoke client-bob.pem\n  djinn tls revoke      # the same list, a fresh next update",
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ca, caKey, err := f.loadCA()
			if err != nil {
				return err
			}
			path := filepath.Join(f.dir, crlName)
			entries, number, err := readLabCRL(path, ca)
			if err != nil {
				return err
			}
			listed := map[string]bool{}
			for _, e := range entries {
				listed[e.SerialNumber.Text(16)] = true
			}
			v := tlsRevokedView{CRL: path, Added: []string{}}
			now := time.Now()
			for _, file := range args {
				c, err := readCertificate(file)
				if err != nil {
					return err
				}
				if err := c.CheckSignatureFrom(ca); err != nil {
					return fmt.Errorf("%s: the CA in %s did not sign it (%v): revoke it with the CA that did", file, f.dir, err)
				}
				serial := c.SerialNumber.Text(16)
				if !listed[serial] {
					listed[serial] = true
					entries = append(entries, x509.RevocationListEntry{SerialNumber: c.SerialNumber, RevocationTime: now})
					v.Added = append(v.Added, serial)
				}
			}
			next := now.AddDate(0, 0, f.days)
			if next.After(ca.NotAfter) {
				next = ca.NotAfter
			}
			der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
				Number: number.Add(number, big.NewInt(1)), ThisUpdate: now, NextUpdate: next, RevokedCertificateEntries: entries,
			}, ca, caKey)
			if err != nil {
				return fmt.Errorf("sign the revocation list: %w", err)
			}
			if err := writeReplacing(path, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})); err != nil {
				return err
			}
			for _, e := range entries {
				v.Revoked = append(v.Revoked, e.SerialNumber.Text(16))
			}
			if v.Revoked == nil {
				v.Revoked = []string{}
			}
			v.NextUpdate = next.UTC().Format(time.RFC3339)
			v.Use = "djinn serve … --tls-ca " + filepath.Join(f.dir, "ca.pem") + " --tls-crl " + path
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) {
				fmt.Fprintf(w, "wrote %s: %d revoked", v.CRL, len(v.Revoked))
				if len(v.Added) > 0 {
					fmt.Fprintf(w, ", %d added (serial %v)", len(v.Added), v.Added)
				}
				fmt.Fprintf(w, "\nnext update  %s\nuse          %s\n", v.NextUpdate, v.Use)
			})
		},
	}
	f.register(cmd)
	cmd.Flags().Lookup("days").Usage = "days until the list's next update"
	cmd.Flags().Lookup("force").Hidden = true // the list is always replaced, keeping its entries
	return cmd
}

// readLabCRL reads the revocation list at path, which ca must have
// signed: its entries and number (none and zero when there is no file).
func readLabCRL(path string, ca *x509.Certificate) ([]x509.RevocationListEntry, *big.Int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, new(big.Int), nil
	}
	if err != nil {
		return nil, nil, err
	}
	der := pemBlock(b, "X509 CRL")
	if der == nil {
		return nil, nil, fmt.Errorf("%s: no PEM revocation list (X509 CRL) in it: move it aside to start a new one", path)
	}
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w: move it aside to start a new one", path, err)
	}
	if err := crl.CheckSignatureFrom(ca); err != nil {
		return nil, nil, fmt.Errorf("%s: not signed by this directory's CA (%v): move it aside to start a new one", path, err)
	}
	number := new(big.Int)
	if crl.Number != nil {
		number.Set(crl.Number)
	}
	return crl.RevokedCertificateEntries, number, nil
}

// readCertificate reads the first PEM certificate of a file.
func readCertificate(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	der := pemBlock(b, "CERTIFICATE")
	if der == nil {
		return nil, fmt.Errorf("%s: no PEM certificate in it: name a certificate file (NAME.pem, not its key)", path)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// writeReplacing writes data to path whole: beside it first, then renamed
// over it, so that a reader sees the old file or the new, never half.
func writeReplacing(path string, data []byte) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
