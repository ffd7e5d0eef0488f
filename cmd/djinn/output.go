package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v2"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// globals are the flags the client commands share.
type globals struct {
	args   []string // the command line, for what cobra does not keep (strictTree)
	server string
	output string
	tlsCA  string
	cert   string
	key    string
	// secretFile holds the cluster's join secret (joinSecret).
	secretFile string
	// waitTimeoutS is --wait-timeout as given; waitTimeout, once checked,
	// how long a service command waits for a server still starting.
	waitTimeoutS string
	waitTimeout  time.Duration
	reads        readFlags // the lookup commands' freshness
}

// outputHelp describes -o.
const outputHelp = "output: text, json, yaml, or template=GO-TEMPLATE (over the JSON form, e.g. template='{{.id}}')"

// withOutput registers -o on cmd and its subcommands.
func (g *globals) withOutput(cmd *cobra.Command) *cobra.Command {
	pf := cmd.PersistentFlags()
	pf.StringVarP(&g.output, "output", "o", "text", outputHelp)
	_ = cmd.RegisterFlagCompletionFunc("output", completeWords("text", "json", "yaml", "template="))
	return cmd
}

// client registers the flags of a client command group: --server, the
// client's TLS and -o.
func (g *globals) client(cmd *cobra.Command) *cobra.Command {
	pf := cmd.PersistentFlags()
	pf.StringVar(&g.server, "server", envOr("DJINN_SERVER", "127.0.0.1:4161"), "gRPC address of a djinn server, or several of one cluster (comma-separated, or a DNS name with several addresses); or DJINN_SERVER")
	pf.StringVar(&g.tlsCA, "tls-ca", envOr("DJINN_TLS_CA", ""), "PEM CA that verifies the server: connect with TLS (or DJINN_TLS_CA)")
	pf.StringVar(&g.cert, "tls-cert", envOr("DJINN_TLS_CERT", ""), "PEM client certificate, for mutual TLS (or DJINN_TLS_CERT)")
	pf.StringVar(&g.key, "tls-key", envOr("DJINN_TLS_KEY", ""), "PEM key of --tls-cert (or DJINN_TLS_KEY)")
	pf.StringVar(&g.secretFile, "join-secret-file", envOr("DJINN_JOIN_SECRET_FILE", ""), "file holding the cluster's join secret, the operator role without mutual TLS, sent to the --server cluster's members alone (default: djinn-data/join-secret when --server is on this machine)")
	pf.StringVar(&g.waitTimeoutS, "wait-timeout", envOr("DJINN_WAIT_TIMEOUT", defaultWaitTimeout.String()), "how long a service command waits for a server still starting to be ready (a Go duration; 0: not at all); or DJINN_WAIT_TIMEOUT")
	alias(pf, "ca", "tls-ca")
	alias(pf, "cert", "tls-cert")
	alias(pf, "key", "tls-key")
	return g.withOutput(cmd)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// checkOutput checks -o.
func (g *globals) checkOutput() error {
	switch {
	case g.output == "", g.output == "text", g.output == "json", g.output == "yaml":
		return nil
	case strings.HasPrefix(g.output, "template="):
		_, err := template.New("o").Parse(strings.TrimPrefix(g.output, "template="))
		if err != nil {
			return usageError{fmt.Errorf("-o %s: %w", g.output, err)}
		}
		return nil
	}
	return usageError{fmt.Errorf("-o %q: want text, json, yaml or template=GO-TEMPLATE", g.output)}
}

// checkWaitTimeout parses --wait-timeout, of the client commands (the
// others have none).
func (g *globals) checkWaitTimeout() error {
	if g.waitTimeoutS == "" {
		return nil
	}
	d, err := time.ParseDuration(g.waitTimeoutS)
	if err != nil {
		return usageError{fmt.Errorf("--wait-timeout %q (or DJINN_WAIT_TIMEOUT): not a duration (a Go duration: 0, 500ms, 30s, 2m)", g.waitTimeoutS)}
	}
	if d < 0 {
		return usageError{fmt.Errorf("--wait-timeout %s (or DJINN_WAIT_TIMEOUT): must be 0 (do not wait) or positive", d)}
	}
	g.waitTimeout = d
	return nil
}

// structured reports whether -o asks for a machine-readable form.
func (g *globals) structured() bool { return g.output != "text" }

// dial connects to --server (one endpoint or several, comma-separated, or a
// DNS name with several addresses) with the TLS flags.
func (g *globals) dial(ctx context.Context) (*client.Client, error) {
	if eps, err := client.SplitEndpoints(g.server); err != nil || len(eps) == 0 {
		if err == nil {
			err = djinn.Errorf(djinn.InvalidArgument, "no endpoint given")
		}
		return nil, usageError{fmt.Errorf("--server: %w", err)}
	}
	return g.dialAt(ctx, g.server)
}

// dialAt connects to addr with the TLS flags.
func (g *globals) dialAt(ctx context.Context, addr string) (*client.Client, error) {
	if err := g.checkOutput(); err != nil {
		return nil, err
	}
	opts, err := g.tlsOptions()
	if err != nil {
		return nil, err
	}
	sec, err := g.joinSecret()
	if err != nil {
		return nil, err
	}
	if sec != nil {
		opts = append(opts, sec)
	}
	return client.Dial(ctx, addr, opts...)
}

// pool returns a connection pool with the TLS flags, for a command that
// reaches what references name and no server of its own (events send): it
// needs no --server, and presents no join secret.
func (g *globals) pool() (*client.Pool, error) {
	if err := g.checkOutput(); err != nil {
		return nil, err
	}
	opts, err := g.tlsOptions()
	if err != nil {
		return nil, err
	}
	return client.NewPool(opts...), nil
}

// tlsOptions are the client options of the TLS flags: none without them.
func (g *globals) tlsOptions() ([]client.Option, error) {
	if g.tlsCA == "" && g.cert == "" && g.key == "" {
		return nil, nil
	}
	cfg, err := g.tlsConfig()
	if err != nil {
		return nil, err
	}
	return []client.Option{client.WithTLS(cfg)}, nil
}

// tlsConfig is the client's TLS: --tls-ca verifies the server, --tls-cert
// and --tls-key are its own certificate.
func (g *globals) tlsConfig() (*tls.Config, error) {
	if (g.cert == "") != (g.key == "") {
		return nil, usageError{errors.New("--tls-cert and --tls-key go together: give both, a client certificate and its key (djinn tls client NAME makes a pair)")}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if g.tlsCA != "" {
		pem, err := os.ReadFile(g.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificates in it", g.tlsCA)
		}
		cfg.RootCAs = pool
	}
	if g.cert != "" || g.key != "" {
		cert, err := tls.LoadX509KeyPair(g.cert, g.key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// printMu keeps the lines of commands that print from several goroutines
// (listeners) whole.
var printMu sync.Mutex

// print writes v in the form -o asks for: its JSON form (json), the same
// as YAML (yaml), a template over the JSON form, or text, which calls text.
// v follows the JSON convention of jsonform.go.
func (g *globals) print(w io.Writer, v any, text func(io.Writer)) error {
	printMu.Lock()
	defer printMu.Unlock()
	if g.output == "text" || g.output == "" {
		text(w)
		return nil
	}
	return g.encode(w, v, true)
}

// printLine writes v as one line of its JSON form (json), a YAML document
// (yaml), a template's line, or text: the form of commands that print a
// stream of answers (events, service events).
func (g *globals) printLine(w io.Writer, v any, text func(io.Writer)) {
	printMu.Lock()
	defer printMu.Unlock()
	if !g.structured() {
		text(w)
		return
	}
	_ = g.encode(w, v, false)
}

// encode writes v as -o asks: indented JSON or one line of it, a YAML
// document, or a template's output and a newline.
func (g *globals) encode(w io.Writer, v any, indent bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	switch {
	case g.output == "json" && indent:
		var out bytes.Buffer
		_ = json.Indent(&out, b, "", "  ")
		out.WriteByte('\n')
		_, err = w.Write(out.Bytes())
	case g.output == "json":
		_, err = fmt.Fprintf(w, "%s\n", b)
	case g.output == "yaml":
		err = writeYAML(w, b)
	default:
		err = writeTemplate(w, strings.TrimPrefix(g.output, "template="), b)
	}
	return err
}

// writeYAML writes a JSON document as a YAML one, keys in the same order.
func writeYAML(w io.Writer, jsonDoc []byte) error {
	// Wrapped in an object, every object inside decodes in order.
	var wrapped yaml.MapSlice
	if err := yaml.Unmarshal(append(append([]byte(`{"v":`), jsonDoc...), '}'), &wrapped); err != nil {
		return err
	}
	out, err := yaml.Marshal(wrapped[0].Value)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "---\n%s", out)
	return err
}

// writeTemplate executes a Go template over a JSON document's value.
func writeTemplate(w io.Writer, text string, jsonDoc []byte) error {
	t, err := template.New("o").Option("missingkey=error").Parse(text)
	if err != nil {
		return usageError{fmt.Errorf("-o template=%s: %w", text, err)}
	}
	var v any
	if err := json.Unmarshal(jsonDoc, &v); err != nil {
		return err
	}
	var out bytes.Buffer
	if err := t.Execute(&out, v); err != nil {
		// The command has done its work: what it answered is not lost.
		return fmt.Errorf("-o template=%s: %w%s; the answer: %s", text, err, fieldsOf(v), jsonDoc)
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// fieldsOf names the fields of a JSON object a template may use, or "".
func fieldsOf(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, "."+k)
	}
	sort.Strings(names)
	return " (its fields: " + strings.Join(names, " ") + ")"
}

// printError writes err as the command's last word on stderr: one line,
// or a JSON object with -o json (and -o yaml).
func (g *globals) printError(w io.Writer, err error, code int) {
	printMu.Lock()
	defer printMu.Unlock()
	if g.output != "json" && g.output != "yaml" {
		fmt.Fprintln(w, "djinn:", oneLine(err.Error()))
		return
	}
	v := map[string]any{"error": errorJSON{Message: oneLine(err.Error()), Kind: errorKind(err), ExitStatus: code}}
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "%s\n", b)
}

// errorJSON is an error in JSON.
type errorJSON struct {
	Message    string `json:"message"`
	Kind       string `json:"kind"` // a djinn error kind (UNKNOWN_LEASE, …), USAGE, NEGATIVE, or ERROR
	ExitStatus int    `json:"exit_status"`
}

// errorKind names err's kind for errorJSON.
func errorKind(err error) string {
	var u usageError
	var n negative
	switch {
	case exitStatus(err) == exitUsage || errorsAs(err, &u):
		return "USAGE"
	case errorsAs(err, &n):
		return "NEGATIVE"
	}
	var de *djinn.Error
	var k djinn.Kind
	switch {
	case errorsAs(err, &de):
		return string(de.Kind)
	case errorsAs(err, &k):
		return string(k)
	}
	return "ERROR" // the command's own failure: djinn.KindOf would call it INTERNAL, the server's
}

// notice writes a notice on stderr: a line, or a JSON object with -o json.
func (g *globals) notice(w io.Writer, v map[string]any, text string) {
	printMu.Lock()
	defer printMu.Unlock()
	if g.output != "json" && g.output != "yaml" {
		fmt.Fprintln(w, "djinn: note:", text)
		return
	}
	v["message"] = text
	b, _ := json.Marshal(map[string]any{"notice": v})
	fmt.Fprintf(w, "%s\n", b)
}

// oneLine keeps an error on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
