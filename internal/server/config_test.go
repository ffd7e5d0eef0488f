package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "djinn.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigDefaultChecks(t *testing.T) {
	t.Parallel()
	cfg := server.Default()
	if err := cfg.Check(); err != nil {
		t.Fatalf("the defaults do not pass Check: %v", err)
	}
	if !cfg.Mailbox.Enabled || cfg.DataDir == "" || !strings.HasPrefix(cfg.Listen, "127.0.0.1:") {
		t.Errorf("defaults: %+v; want the mailbox on, a data directory and loopback addresses", cfg)
	}
}

func TestConfigLoadFile(t *testing.T) {
	t.Parallel()
	t.Run("a valid file overlays the defaults", func(t *testing.T) {
		path := writeFile(t, `
listen = "127.0.0.1:7000"
join = "10.0.0.1:4161"
log-level = "debug"
connect-timeout = "3s"
keepalive-time = "30s"
keepalive-timeout = "5s"
keepalive-min-time = "20s"

[tls]
cert = "server.pem"
key = "server-key.pem"
ca = "ca.pem"
client-auth = true

[lease]
checkpoint = "10s"

[mailbox]
default-lease = "any"
max-lease = "forever"
max-stored = 7

[raft-tuning]
election-timeout = "250ms"
snapshot-threshold = 100

[security]
operators = ["cn:ops", "uri:spiffe://example.org/ops"]

[quota]
lookup-items = 500
streams = 10

[txn]
max-remembered = 5000

[quota.principals."cn:batch"]
lookup-items = 50000
`)
		cfg := server.Default()
		if err := cfg.LoadFile(path); err != nil {
			t.Fatal(err)
		}
		want := server.Default()
		want.Listen, want.Join, want.LogLevel = "127.0.0.1:7000", "10.0.0.1:4161", "debug"
		want.ConnectTimeout, want.KeepaliveTime = server.Duration(3*time.Second), server.Duration(30*time.Second)
		want.KeepaliveTimeout, want.KeepaliveMinTime = server.Duration(5*time.Second), server.Duration(20*time.Second)
		want.TLS = server.TLSConfig{Cert: "server.pem", Key: "server-key.pem", CA: "ca.pem", ClientAuth: true}
		want.Lease.Checkpoint = server.Duration(10 * time.Second)
		want.Mailbox.DefaultLease, want.Mailbox.MaxLease, want.Mailbox.MaxStored = server.Duration(djinn.Any), server.Duration(djinn.Forever), 7
		want.Raftcfg.ElectionTimeout, want.Raftcfg.SnapshotThreshold = server.Duration(250*time.Millisecond), 100
		want.Security.Operators = []string{"cn:ops", "uri:spiffe://example.org/ops"}
		want.Quota.LookupItems, want.Quota.Streams = 500, 10
		want.Txn.MaxRemembered = 5000
		want.Quota.Principals = map[string]map[string]int64{"cn:batch": {"lookup-items": 50000}}
		if !reflect.DeepEqual(cfg, want) {
			t.Errorf("loaded\n%+v\nwant\n%+v", cfg, want)
		}
	})
	tests := []struct {
		name, text string
		names      []string // the error names these
	}{
		{"an unknown key is an error naming it", "listen = \"127.0.0.1:1\"\n[mailbox]\nmax-stord = 3\n", []string{"mailbox.max-stord"}},
		{"every unknown key is named", "colour = \"blue\"\n[tls]\nkey-file = \"k\"\n", []string{"colour", "tls.key-file"}},
		{"a value of the wrong type names its key", "[mailbox]\nmax-stored = \"lots\"\n", []string{"max-stored"}},
		{"a duration that does not parse names its key", "[lease]\ncheckpoint = \"soon\"\n", []string{"checkpoint", "soon"}},
		{"a file that is not TOML names the file", "listen = \n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.text)
			cfg := server.Default()
			err := cfg.LoadFile(path)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, n := range append(tt.names, path) {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("error %q does not name %q", err, n)
				}
			}
		})
	}
	t.Run("a missing file names it", func(t *testing.T) {
		cfg := server.Default()
		path := filepath.Join(t.TempDir(), "none.toml")
		if err := cfg.LoadFile(path); err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("load missing file: %v", err)
		}
	})
}

func TestConfigLoadEnv(t *testing.T) {
	t.Parallel()
	cfg := server.Default()
	err := cfg.LoadEnv([]string{
		"DJINN_LISTEN=127.0.0.1:7001",
		"DJINN_MAILBOX_MAX_STORED=9",
		"DJINN_MAILBOX_DEFAULT_LEASE=90s",
		"DJINN_MAILBOX_ENABLED=false",
		"DJINN_TLS_CLIENT_AUTH=true",
		"DJINN_RAFT_TUNING_HEARTBEAT_TIMEOUT=50ms",
		"DJINN_RAFT_TUNING_SNAPSHOT_THRESHOLD=12",
		"DJINN_RAFT=127.0.0.1:7002",
		"DJINN_RAFT_ADVERTISE=10.0.0.2:7002",
		"DJINN_QUOTA_LOOKUP_ITEMS=77",
		"DJINN_KV_MAX_BYTES=4096",
		"DJINN_KV_MAX_BYTES_PER_PRINCIPAL=512",
		"DJINN_SECURITY_OPERATORS=cn:ops,cn:admin",
		"DJINN_SERVER=127.0.0.1:9", // the CLI's, not a server key
		"LISTEN=127.0.0.1:1",       // not ours
		"DJINN_NO_EQUALS",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := server.Default()
	want.Listen, want.Raft, want.RaftAdvertise = "127.0.0.1:7001", "127.0.0.1:7002", "10.0.0.2:7002"
	want.Mailbox.MaxStored, want.Mailbox.DefaultLease, want.Mailbox.Enabled = 9, server.Duration(90*time.Second), false
	want.TLS.ClientAuth = true
	want.Raftcfg.HeartbeatTimeout, want.Raftcfg.SnapshotThreshold = server.Duration(50*time.Millisecond), 12
	want.Quota.LookupItems, want.Security.Operators = 77, []string{"cn:ops", "cn:admin"}
	want.KV.MaxBytes, want.KV.MaxBytesPerPrincipal = 4096, 512
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", cfg, want)
	}

	tests := []struct{ name, env string }{
		{"an integer that does not parse", "DJINN_MAILBOX_MAX_STORED=lots"},
		{"a boolean that does not parse", "DJINN_MAILBOX_ENABLED=maybe"},
		{"a duration that does not parse", "DJINN_LEASE_CHECKPOINT=soon"},
		{"a negative count where none may be", "DJINN_RAFT_TUNING_SNAPSHOT_THRESHOLD=-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is an error naming the variable", func(t *testing.T) {
			cfg := server.Default()
			name, _, _ := strings.Cut(tt.env, "=")
			wantErr(t, tt.env, cfg.LoadEnv([]string{tt.env}), djinn.ErrInvalidArgument, name)
		})
	}
}

func TestConfigCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*server.Config)
		names  string // the error names it
	}{
		{"an empty data directory", func(c *server.Config) { c.DataDir = "" }, "data-dir"},
		{"a node id with a space", func(c *server.Config) { c.NodeID = "bad id" }, `node id "bad id"`},
		{"a node id with a slash", func(c *server.Config) { c.NodeID = "n/1" }, `node id "n/1"`},
		{"a discovery address without a port", func(c *server.Config) { c.Lookup.Discovery = "nohost" }, "lookup discovery"},
		{"a listen address without a port", func(c *server.Config) { c.Listen = "localhost" }, "listen"},
		{"a listen address with a named port", func(c *server.Config) { c.Listen = "127.0.0.1:grpc" }, "listen"},
		{"an admin address without a host", func(c *server.Config) { c.Admin = ":4162" }, "admin"},
		{"an empty raft address", func(c *server.Config) { c.Raft = "" }, "raft"},
		{"a bad advertised address", func(c *server.Config) { c.Advertise = "example.org" }, "advertise"},
		{"a bad raft advertised address", func(c *server.Config) { c.RaftAdvertise = "10.0.0.1:123456" }, "raft-advertise"},
		{"a bad join address", func(c *server.Config) { c.Join = "10.0.0.1" }, "join"},
		{"a handshake timeout of zero", func(c *server.Config) { c.HandshakeTimeout = 0 }, "handshake-timeout 0s"},
		{"a connect timeout of zero", func(c *server.Config) { c.ConnectTimeout = 0 }, "connect-timeout 0s"},
		{"a keepalive timeout of zero", func(c *server.Config) { c.KeepaliveTimeout = 0 }, "keepalive-timeout 0s"},
		{"a keepalive time below gRPC's least", func(c *server.Config) { c.KeepaliveTime = server.Duration(5 * time.Second) }, "keepalive-time 5s"},
		{"a keepalive min time of zero", func(c *server.Config) { c.KeepaliveMinTime = 0 }, "keepalive-min-time 0s"},
		{"a keepalive min time above the keepalive time", func(c *server.Config) {
			c.KeepaliveTime, c.KeepaliveMinTime = server.Duration(20*time.Second), server.Duration(30*time.Second)
		}, "keepalive-min-time 30s"},
		{"a certificate without a key", func(c *server.Config) { c.TLS.Cert = "server.pem" }, "tls"},
		{"a key without a certificate", func(c *server.Config) { c.TLS.Key = "server-key.pem" }, "tls"},
		{"client-auth without a CA", func(c *server.Config) {
			c.TLS = server.TLSConfig{Cert: "server.pem", Key: "server-key.pem", ClientAuth: true}
		}, "client-auth"},
		{"client-auth without a certificate", func(c *server.Config) { c.TLS = server.TLSConfig{CA: "ca.pem", ClientAuth: true} }, "client-auth"},
		{"a certificate without a CA to verify peers", func(c *server.Config) {
			c.TLS = server.TLSConfig{Cert: "server.pem", Key: "server-key.pem"}
		}, "tls ca"},
		{"a peer certificate without its key", func(c *server.Config) {
			c.TLS = server.TLSConfig{Cert: "server.pem", Key: "server-key.pem", CA: "ca.pem", PeerCert: "peer.pem"}
		}, "peer-key"},
		{"a peer certificate without a server certificate", func(c *server.Config) {
			c.TLS = server.TLSConfig{CA: "ca.pem", PeerCert: "peer.pem", PeerKey: "peer-key.pem"}
		}, "peer-cert"},
		{"DESIGN.md 7 an operator named as no certificate names a principal", func(c *server.Config) {
			c.TLS = server.TLSConfig{Cert: "server.pem", Key: "server-key.pem", CA: "ca.pem", ClientAuth: true}
			c.Security.Operators = []string{"alice"}
		}, "security operators"},
		{"DESIGN.md 7 the peers named as an operator", func(c *server.Config) {
			c.TLS = server.TLSConfig{Cert: "server.pem", Key: "server-key.pem", CA: "ca.pem", ClientAuth: true}
			c.Security.Operators = []string{"cn:alice", "uri:djinn-peer://n1"}
		}, "djinn-peer"},
		{"DESIGN.md 7 operators without client certificates to name them", func(c *server.Config) {
			c.Security.Operators = []string{"cn:alice"}
		}, "client-auth"},
		{"DESIGN.md 7 a join secret under mutual TLS", func(c *server.Config) {
			c.TLS = server.TLSConfig{Cert: "server.pem", Key: "server-key.pem", CA: "ca.pem", ClientAuth: true}
			c.Security.JoinSecretFile = "secret"
		}, "join-secret-file"},
		{"DESIGN.md 7 a negative quota", func(c *server.Config) { c.Quota.LookupItems = -1 }, "quota lookup-items"},
		{"DESIGN.md 7 a negative bound on the key/value store", func(c *server.Config) { c.KV.MaxBytes = -1 }, "kv max-bytes -1"},
		{"DESIGN.md 7 a negative bound on a principal's keys and values", func(c *server.Config) { c.KV.MaxBytesPerPrincipal = -1 }, "kv max-bytes-per-principal -1"},
		{"DESIGN.md 7 a principal's own quota for an unknown quota", func(c *server.Config) {
			c.TLS = server.TLSConfig{Cert: "server.pem", Key: "server-key.pem", CA: "ca.pem", ClientAuth: true}
			c.Quota.Principals = map[string]map[string]int64{"cn:a": {"lookup-itemz": 5}}
		}, "lookup-itemz"},
		{"DESIGN.md 7 a quota for a principal no certificate names", func(c *server.Config) {
			c.TLS = server.TLSConfig{Cert: "server.pem", Key: "server-key.pem", CA: "ca.pem", ClientAuth: true}
			c.Quota.Principals = map[string]map[string]int64{"batch": {"lookup-items": 5}}
		}, "quota principals"},
		{"DESIGN.md 7 principals' quotas without client certificates to name them", func(c *server.Config) {
			c.Quota.Principals = map[string]map[string]int64{"cn:a": {"lookup-items": 5}}
		}, "client-auth"},
		{"no room for stored events", func(c *server.Config) { c.Mailbox.MaxStored = 0 }, "max-stored"},
		{"no settled transaction remembered", func(c *server.Config) { c.Txn.MaxRemembered = 0 }, "txn max-remembered 0"},
		{"a zero checkpoint", func(c *server.Config) { c.Lease.Checkpoint = 0 }, "checkpoint"},
		{"an unknown log level", func(c *server.Config) { c.LogLevel = "loud" }, "log-level"},
		{"DESIGN.md 5 a lookup group that is not UTF-8 text", func(c *server.Config) { c.Lookup.Groups = []string{"lab", "\xff"} }, `lookup groups: group "\xff"`},
		{"no room for an event", func(c *server.Config) { c.Mailbox.MaxEventBytes = 0 }, "max-event-bytes"},
		{"no room for registrations", func(c *server.Config) { c.Mailbox.MaxRegistrations = -1 }, "max-registrations"},
		{"an empty expiry batch", func(c *server.Config) { c.Lease.ExpiryBatch = 0 }, "expiry-batch"},
		{"a zero expiry rate", func(c *server.Config) { c.Lease.ExpiryRate = 0 }, "expiry-rate"},
		{"a default lease above the maximum", func(c *server.Config) { c.Mailbox.DefaultLease = server.Duration(2 * time.Hour) }, "default-lease"},
		{"a zero maximum lease", func(c *server.Config) { c.Mailbox.MaxLease = 0 }, "max-lease"},
		{"a heartbeat timeout of any", func(c *server.Config) { c.Raftcfg.HeartbeatTimeout = server.Duration(djinn.Any) }, "heartbeat-timeout"},
		{"an election timeout below the heartbeat", func(c *server.Config) { c.Raftcfg.ElectionTimeout = server.Duration(time.Millisecond * 20) }, "election-timeout"},
		{"a zero snapshot interval", func(c *server.Config) { c.Raftcfg.SnapshotInterval = 0 }, "snapshot-interval"},
		{"a snapshot interval below Raft's least", func(c *server.Config) { c.Raftcfg.SnapshotInterval = server.Duration(4 * time.Millisecond) }, "snapshot-interval 4ms: want at least 5ms"},
		{"a negative announcement interval", func(c *server.Config) { c.Lookup.Announce = server.Duration(-5 * time.Second) }, "lookup announce -5s"},
		{"an announcement interval of any", func(c *server.Config) { c.Lookup.Announce = server.Duration(djinn.Any) }, "lookup announce any"},
		{"a zero announcement interval", func(c *server.Config) { c.Lookup.Announce = 0 }, "lookup announce 0s"},
		{"an announcement interval of forever", func(c *server.Config) { c.Lookup.Announce = server.Duration(djinn.Forever) }, "lookup announce forever"},
		{"no trailing log entries", func(c *server.Config) { c.Raftcfg.TrailingLogs = 0 }, "trailing-logs 0"},
		{"log segments below 64 KiB", func(c *server.Config) { c.Raftcfg.WALSegmentSize = server.MinWALSegmentSize - 1 }, "wal-segment-size 65535"},
		{"log segments above 1 GiB", func(c *server.Config) { c.Raftcfg.WALSegmentSize = server.MaxWALSegmentSize + 1 }, "wal-segment-size 1073741825"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := server.Default()
			tt.change(&cfg)
			wantErr(t, "check", cfg.Check(), djinn.ErrInvalidArgument, tt.names)
		})
	}
	t.Run("Open checks the configuration first", func(t *testing.T) {
		cfg := servertest.Config(t)
		cfg.Listen = "nowhere"
		s, err := server.Open(testContext(t), cfg, nil)
		if err == nil {
			s.Close()
		}
		wantErr(t, "open", err, djinn.ErrInvalidArgument, "listen")
	})
}

// FuzzConfig feeds the configuration's external inputs — a TOML file and
// DJINN_* variables — through what serve does with them: LoadFile,
// LoadEnv, then Check. None panics; what LoadFile refuses names the file
// (serve answers it as a usage error), what LoadEnv and Check refuse is
// InvalidArgument; a configuration Check accepts is one the node's Raft
// takes as the node builds it (Raft's own check names no key) and one
// discovery takes (its announcement interval positive).
func FuzzConfig(f *testing.F) {
	f.Add([]byte(`listen = "127.0.0.1:7000"
log-level = "debug"
[mailbox]
default-lease = "any"
max-lease = "forever"
[raft-tuning]
snapshot-interval = "5ms"
heartbeat-timeout = "10ms"
election-timeout = "10ms"
[lookup]
announce = "200ms"
groups = ["", "lab"]
[quota]
streams = 10
`), "DJINN_LOOKUP_ANNOUNCE=1s\nDJINN_RAFT_TUNING_SNAPSHOT_INTERVAL=1m")
	f.Add([]byte("[lookup]\nannounce = \"-1s\"\n"), "")
	f.Add([]byte("[raft-tuning]\nsnapshot-interval = \"1ms\"\n"), "")
	f.Add([]byte("[security]\noperators = [\"cn:ops\"]\n[tls]\nclient-auth = true\n"), "DJINN_LOOKUP_GROUPS=a,,b\nDJINN_KV_MAX_BYTES=-1")
	f.Add([]byte("[quota.principals.\"cn:batch\"]\nlookup-items = 5\n"), "DJINN_LEASE_CHECKPOINT=forever")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, file []byte, env string) {
		path := filepath.Join(dir, "djinn.toml")
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := server.Default()
		if err := cfg.LoadFile(path); err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("LoadFile: %v, which does not name the file", err)
			}
			return
		}
		if err := cfg.LoadEnv(strings.Split(env, "\n")); err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("LoadEnv: %v, want InvalidArgument", err)
			}
			return
		}
		if err := cfg.Check(); err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("Check: %v, want InvalidArgument", err)
			}
			return
		}
		rc := raft.DefaultConfig()
		rc.LocalID = "n1"
		rc.HeartbeatTimeout = time.Duration(cfg.Raftcfg.HeartbeatTimeout)
		rc.ElectionTimeout = time.Duration(cfg.Raftcfg.ElectionTimeout)
		rc.LeaderLeaseTimeout = rc.HeartbeatTimeout / 2
		rc.SnapshotInterval = time.Duration(cfg.Raftcfg.SnapshotInterval)
		if err := raft.ValidateConfig(rc); err != nil {
			t.Fatalf("Check accepted a configuration Raft refuses: %v", err)
		}
		if a := time.Duration(cfg.Lookup.Announce); a <= 0 {
			t.Fatalf("Check accepted lookup announce %s, which discovery refuses", djinn.FormatDuration(a))
		}
	})
}
