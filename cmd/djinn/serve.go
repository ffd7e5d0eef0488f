package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/internal/server"
)

func newServe() *cobra.Command {
	cfg := server.Default()
	var configFile string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a djinn server",
		Long: `Run a djinn server with every service, on loopback by default.

Configuration comes from the defaults, then a TOML file (--config), then
DJINN_* environment variables (DJINN_LISTEN, DJINN_DATA_DIR,
DJINN_MAILBOX_MAX_STORED, ...), then flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			final := server.Default()
			if configFile != "" {
				if err := final.LoadFile(configFile); err != nil {
					return usageError{err}
				}
			}
			if err := final.LoadEnv(server.Environ()); err != nil {
				return usageError{err}
			}
			applyFlags(cmd.Flags(), &final, &cfg)
			return serve(cmd.Context(), final, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "TOML configuration file")
	serveFlags(cmd.Flags(), &cfg)
	return cmd
}

// serveFlags registers the configuration flags of djinn serve on f, each
// setting its field of cfg; flagSetters copies them onto the final
// configuration.
func serveFlags(f *pflag.FlagSet, cfg *server.Config) {
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory")
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "gRPC API address")
	f.StringVar(&cfg.Advertise, "advertise", "", "gRPC address put in references (default: --listen)")
	f.StringVar(&cfg.Admin, "admin", cfg.Admin, "admin HTTP address: the web console (/), /healthz, /readyz, /metrics, /debug/pprof")
	f.StringVar(&cfg.Raft, "raft", cfg.Raft, "Raft peer address")
	f.StringVar(&cfg.RaftAdvertise, "raft-advertise", "", "Raft address peers dial (default: --raft)")
	f.StringVar(&cfg.NodeID, "node-id", "", "node id (default: stored in the data directory, random on first start)")
	f.StringVar(&cfg.Join, "join", "", "gRPC address of a member of the cluster to join (or several, comma-separated)")
	f.BoolVar(&cfg.Cluster.Bootstrap, "bootstrap", cfg.Cluster.Bootstrap, "without --join and state, start a cluster of its own (false: wait for djinn member add)")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
	f.BoolVar(&cfg.LogJSON, "log-json", false, "log JSON lines instead of text")
	f.BoolVar(&cfg.ProfileContention, "profile-contention", false, "record where goroutines wait (admin /debug/pprof/block and /debug/pprof/mutex); costs some CPU")
	f.StringVar(&cfg.TLS.Cert, "tls-cert", "", "PEM certificate for the client and peer ports")
	f.StringVar(&cfg.TLS.Key, "tls-key", "", "PEM private key for --tls-cert")
	f.StringVar(&cfg.TLS.CA, "tls-ca", "", "PEM CA certificates that verify peers and clients")
	f.BoolVar(&cfg.TLS.ClientAuth, "tls-client-auth", false, "require client certificates (mutual TLS)")
	f.StringVar(&cfg.TLS.CRL, "tls-crl", "", "PEM revocation lists, signed by a CA of --tls-ca: the certificates they list are refused (read again when the file changes)")
	f.StringVar(&cfg.TLS.PeerCert, "tls-peer-cert", "", "PEM peer certificate, with a djinn-peer://NODE-ID URI SAN (default: --tls-cert)")
	f.StringVar(&cfg.TLS.PeerKey, "tls-peer-key", "", "PEM private key for --tls-peer-cert")
	f.StringVar(&cfg.Security.JoinSecretFile, "join-secret-file", "", "without mutual TLS, the cluster's join secret (a member's data-dir/join-secret) for a node that joins")
	f.Var((*durationFlag)(&cfg.Lease.Checkpoint), "lease-checkpoint", "lease horizon slack: the most a lease may outlive its grant after a restart or failover")
	f.Var((*durationFlag)(&cfg.Mailbox.DefaultLease), "mailbox-default-lease", "mailbox lease granted for Any")
	f.Var((*durationFlag)(&cfg.Mailbox.MaxLease), "mailbox-max-lease", "longest mailbox lease (forever allowed)")
	f.IntVar(&cfg.Mailbox.MaxStored, "mailbox-max-stored", cfg.Mailbox.MaxStored, "most stored events per mailbox registration")
	f.BoolVar(&cfg.Mailbox.Enabled, "mailbox", cfg.Mailbox.Enabled, "run the event mailbox service")
	f.Var((*durationFlag)(&cfg.Renewal.DefaultLease), "renewal-default-lease", "renewal set lease granted for Any")
	f.Var((*durationFlag)(&cfg.Renewal.MaxLease), "renewal-max-lease", "longest renewal set lease (forever allowed)")
	f.BoolVar(&cfg.Renewal.Enabled, "renewal", cfg.Renewal.Enabled, "run the lease renewal service")
	f.Var((*durationFlag)(&cfg.Txn.DefaultLease), "txn-default-lease", "transaction lease granted for Any")
	f.Var((*durationFlag)(&cfg.Txn.MaxLease), "txn-max-lease", "longest transaction lease (forever allowed)")
	f.BoolVar(&cfg.Txn.Enabled, "txn", cfg.Txn.Enabled, "run the transaction manager")
	f.BoolVar(&cfg.KV.Enabled, "kv", cfg.KV.Enabled, "serve the reference key/value transaction participant")
	f.Int64Var(&cfg.KV.MaxBytes, "kv-max-bytes", cfg.KV.MaxBytes, "most bytes of keys and values the key/value store holds (0: 1 GiB)")
	f.Int64Var(&cfg.KV.MaxBytesPerPrincipal, "kv-max-bytes-per-principal", cfg.KV.MaxBytesPerPrincipal, "most bytes of keys and values each principal holds in the key/value store (0: under mutual TLS a sixteenth of --kv-max-bytes, else none of its own)")
	f.BoolVar(&cfg.Lock.Enabled, "lock", cfg.Lock.Enabled, "run the lock service")
	f.BoolVar(&cfg.Lookup.Enabled, "lookup", cfg.Lookup.Enabled, "run the lookup service")
	f.StringVar(&cfg.Lookup.Discovery, "discovery", cfg.Lookup.Discovery, `unicast discovery address of the lookup service ("" turns discovery off)`)
	f.BoolVar(&cfg.Lookup.Multicast, "multicast", cfg.Lookup.Multicast, "multicast discovery: announcements, and answers to multicast requests")
	f.StringSliceVar(&cfg.Lookup.Groups, "groups", cfg.Lookup.Groups, `the lookup service's member groups ("" is the public group)`)
	f.StringSliceVar(&cfg.LookupJoin.Groups, "join-groups", cfg.LookupJoin.Groups, `groups of the lookup services djinn's services register in ([lookup-join] groups; default the public group "")`)
	f.StringSliceVar(&cfg.LookupJoin.Locators, "join-locators", cfg.LookupJoin.Locators, "lookup services djinn's services register in by unicast, jini://host[:port] ([lookup-join] locators)")
	f.BoolVar(&cfg.LookupJoin.Multicast, "join-multicast", cfg.LookupJoin.Multicast, "find the lookup services of --join-groups by multicast ([lookup-join] multicast)")
	f.BoolVar(&cfg.LDS.Enabled, "lds", cfg.LDS.Enabled, "run the lookup discovery service")
	f.BoolVar(&cfg.LDS.Multicast, "lds-multicast", cfg.LDS.Multicast, "the lookup discovery service's group discovery by multicast (without it: locators only)")
	f.Var((*durationFlag)(&cfg.Lock.DefaultOwnerLease), "lock-default-owner-lease", "lock owner lease granted for Any")
	f.Var((*durationFlag)(&cfg.Lock.MaxOwnerLease), "lock-max-owner-lease", "longest lock owner lease (forever allowed)")
	f.Var((*durationFlag)(&cfg.Raftcfg.ElectionTimeout), "election-timeout", "Raft election timeout")
	f.Var((*durationFlag)(&cfg.Raftcfg.HeartbeatTimeout), "heartbeat-timeout", "Raft heartbeat timeout")
}

// applyFlags copies the flags the user set from flagged onto final.
func applyFlags(fs *pflag.FlagSet, final, flagged *server.Config) {
	set := flagSetters(final, flagged)
	fs.Visit(func(f *pflag.Flag) {
		if apply, ok := set[f.Name]; ok {
			apply()
		}
	})
}

// flagSetters maps each configuration flag of djinn serve to the copy of
// its value from flagged onto final. Every flag but --config has one.
func flagSetters(final, flagged *server.Config) map[string]func() {
	return map[string]func(){
		"data-dir":                   func() { final.DataDir = flagged.DataDir },
		"listen":                     func() { final.Listen = flagged.Listen },
		"advertise":                  func() { final.Advertise = flagged.Advertise },
		"admin":                      func() { final.Admin = flagged.Admin },
		"raft":                       func() { final.Raft = flagged.Raft },
		"raft-advertise":             func() { final.RaftAdvertise = flagged.RaftAdvertise },
		"node-id":                    func() { final.NodeID = flagged.NodeID },
		"join":                       func() { final.Join = flagged.Join },
		"join-groups":                func() { final.LookupJoin.Groups = flagged.LookupJoin.Groups },
		"join-locators":              func() { final.LookupJoin.Locators = flagged.LookupJoin.Locators },
		"join-multicast":             func() { final.LookupJoin.Multicast = flagged.LookupJoin.Multicast },
		"bootstrap":                  func() { final.Cluster.Bootstrap = flagged.Cluster.Bootstrap },
		"log-level":                  func() { final.LogLevel = flagged.LogLevel },
		"log-json":                   func() { final.LogJSON = flagged.LogJSON },
		"profile-contention":         func() { final.ProfileContention = flagged.ProfileContention },
		"tls-cert":                   func() { final.TLS.Cert = flagged.TLS.Cert },
		"tls-key":                    func() { final.TLS.Key = flagged.TLS.Key },
		"tls-ca":                     func() { final.TLS.CA = flagged.TLS.CA },
		"tls-client-auth":            func() { final.TLS.ClientAuth = flagged.TLS.ClientAuth },
		"tls-crl":                    func() { final.TLS.CRL = flagged.TLS.CRL },
		"tls-peer-cert":              func() { final.TLS.PeerCert = flagged.TLS.PeerCert },
		"tls-peer-key":               func() { final.TLS.PeerKey = flagged.TLS.PeerKey },
		"join-secret-file":           func() { final.Security.JoinSecretFile = flagged.Security.JoinSecretFile },
		"lease-checkpoint":           func() { final.Lease.Checkpoint = flagged.Lease.Checkpoint },
		"mailbox-default-lease":      func() { final.Mailbox.DefaultLease = flagged.Mailbox.DefaultLease },
		"mailbox-max-lease":          func() { final.Mailbox.MaxLease = flagged.Mailbox.MaxLease },
		"mailbox-max-stored":         func() { final.Mailbox.MaxStored = flagged.Mailbox.MaxStored },
		"mailbox":                    func() { final.Mailbox.Enabled = flagged.Mailbox.Enabled },
		"renewal-default-lease":      func() { final.Renewal.DefaultLease = flagged.Renewal.DefaultLease },
		"renewal-max-lease":          func() { final.Renewal.MaxLease = flagged.Renewal.MaxLease },
		"renewal":                    func() { final.Renewal.Enabled = flagged.Renewal.Enabled },
		"txn-default-lease":          func() { final.Txn.DefaultLease = flagged.Txn.DefaultLease },
		"txn-max-lease":              func() { final.Txn.MaxLease = flagged.Txn.MaxLease },
		"txn":                        func() { final.Txn.Enabled = flagged.Txn.Enabled },
		"kv":                         func() { final.KV.Enabled = flagged.KV.Enabled },
		"kv-max-bytes":               func() { final.KV.MaxBytes = flagged.KV.MaxBytes },
		"kv-max-bytes-per-principal": func() { final.KV.MaxBytesPerPrincipal = flagged.KV.MaxBytesPerPrincipal },
		"lock":                       func() { final.Lock.Enabled = flagged.Lock.Enabled },
		"lock-default-owner-lease":   func() { final.Lock.DefaultOwnerLease = flagged.Lock.DefaultOwnerLease },
		"lock-max-owner-lease":       func() { final.Lock.MaxOwnerLease = flagged.Lock.MaxOwnerLease },
		"election-timeout":           func() { final.Raftcfg.ElectionTimeout = flagged.Raftcfg.ElectionTimeout },
		"heartbeat-timeout":          func() { final.Raftcfg.HeartbeatTimeout = flagged.Raftcfg.HeartbeatTimeout },
		"lookup":                     func() { final.Lookup.Enabled = flagged.Lookup.Enabled },
		"discovery":                  func() { final.Lookup.Discovery = flagged.Lookup.Discovery },
		"multicast":                  func() { final.Lookup.Multicast = flagged.Lookup.Multicast },
		"groups":                     func() { final.Lookup.Groups = flagged.Lookup.Groups },
		"lds":                        func() { final.LDS.Enabled = flagged.LDS.Enabled },
		"lds-multicast":              func() { final.LDS.Multicast = flagged.LDS.Multicast },
	}
}

// memberList names the members ms, with their Raft addresses.
func memberList(ms []replica.Member) string {
	has := make([]string, len(ms))
	for i, m := range ms {
		has[i] = m.ID + " at " + m.RaftAddr
	}
	return "members: " + strings.Join(has, ", ")
}

// secretHint is the flag a command needs to present s's cluster's join
// secret, if it has one.
func secretHint(s *server.Server) string {
	if f := s.JoinSecretFile(); f != "" {
		return " --join-secret-file " + f
	}
	return ""
}

type durationFlag server.Duration

func (d *durationFlag) String() string {
	b, _ := server.Duration(*d).MarshalText()
	return string(b)
}
func (d *durationFlag) Set(s string) error { return (*server.Duration)(d).UnmarshalText([]byte(s)) }
func (d *durationFlag) Type() string       { return "duration" }

func newLogger(cfg server.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serve(ctx context.Context, cfg server.Config, out, errw io.Writer) error {
	if err := cfg.Check(); err != nil {
		return usageError{err} // a configuration not understood, as a bad flag is
	}
	logger := newLogger(cfg, errw)
	profileContention(cfg.ProfileContention)
	s, err := server.Open(ctx, cfg, logger)
	if err != nil {
		return err
	}
	// Started with --bootstrap=false (no cluster until added), or outside
	// the configuration its log holds (removed, or a joiner stopped before
	// its log reached its addition): it waits for a member to add it. A
	// server with --join whose log holds no configuration was added just
	// now by the member it asked (Open): it is catching up, not waiting.
	ms, err := s.Node().Members()
	waiting := err == nil && len(ms) == 0 && cfg.Join == ""
	outside := err == nil && len(ms) > 0 && !slices.ContainsFunc(ms, func(m replica.Member) bool { return m.ID == s.NodeID() })
	if !waiting && !outside {
		readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = s.WaitReady(readyCtx)
		cancel()
		if err != nil && ctx.Err() == nil {
			logger.Warn("no leader yet; serving anyway", "err", err)
		}
	}
	st := s.Describe()
	fmt.Fprintf(out, "djinn serving (node %s, %s)\n", st.NodeID, st.State)
	add := fmt.Sprintf("djinn member add %s --raft %s --grpc %s --server MEMBER%s", st.NodeID, s.RaftAddr(), s.Advertise(), secretHint(s))
	switch {
	case waiting:
		fmt.Fprintf(out, "  waiting to be added to a cluster: %s\n", add)
	case outside:
		fmt.Fprintf(out, "  not a member of the cluster configuration its log holds (%s): it waits until the leader brings its log up to date or adds it; "+
			"if it was removed, add it again at a member: %s\n", memberList(ms), add)
	}
	fmt.Fprintf(out, "  data      %s\n", s.DataDir())
	fmt.Fprintf(out, "  grpc      %s\n", s.Addr())
	fmt.Fprintf(out, "  console   %s/\n", s.AdminURL())
	fmt.Fprintf(out, "  admin     %s  (/healthz /readyz /metrics /debug/pprof/)\n", s.AdminURL())
	fmt.Fprintf(out, "  raft      %s\n", s.RaftAddr())
	if f := s.JoinSecretFile(); f != "" {
		fmt.Fprintf(out, "  secret    %s  (the operator role: djinn --join-secret-file; serve --join --join-secret-file)\n", f)
	}
	for _, svc := range st.Services {
		fmt.Fprintf(out, "  %-9s %s\n", svc.Name, svc.Ref)
	}
	select {
	case <-ctx.Done():
	case <-s.Left():
		logger.Info("left the cluster")
	case err := <-s.Failed():
		// Fail-stop: a node that cannot write its log must not go on
		// leading. A restart reads what the log holds; nothing that was
		// acknowledged is lost.
		logger.Error("the log cannot be written; stopping", "err", err)
		if cerr := s.Close(); cerr != nil {
			logger.Warn("shutdown", "err", cerr)
		}
		return fmt.Errorf("log write failed, server stopped: %w", err)
	}
	logger.Info("shutting down")
	if err := s.Close(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	fmt.Fprintln(out, "djinn stopped")
	_ = os.Stdout.Sync()
	return nil
}

// profileContention turns on the runtime's block profile (every wait of
// 10µs or more, sampled in proportion below that) and its mutex profile
// (one contended unlock in 10) for the whole process, when on.
func profileContention(on bool) {
	if !on {
		return
	}
	runtime.SetBlockProfileRate(int((10 * time.Microsecond).Nanoseconds()))
	runtime.SetMutexProfileFraction(10)
}
