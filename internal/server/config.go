package server

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// Config is a server's configuration. It is read, in increasing order of
// precedence, from the defaults, a TOML file, DJINN_* environment variables
// (the TOML key upper-cased, dots and dashes as underscores: DJINN_LISTEN,
// DJINN_MAILBOX_MAX_STORED) and command-line flags.
type Config struct {
	DataDir string `toml:"data-dir"`
	// Listen is the gRPC API address; Advertise the address put in
	// references (default: Listen).
	Listen    string `toml:"listen"`
	Advertise string `toml:"advertise"`
	Admin     string `toml:"admin"`
	Raft      string `toml:"raft"`
	// RaftAdvertise is the Raft address peers dial (default: Raft).
	RaftAdvertise string `toml:"raft-advertise"`
	NodeID        string `toml:"node-id"`
	// Join is the gRPC address of a member of an existing cluster, or
	// several, comma-separated (tried in turn). A node with Join set and no
	// state joins instead of bootstrapping.
	Join     string `toml:"join"`
	LogLevel string `toml:"log-level"`
	LogJSON  bool   `toml:"log-json"`

	TLS     TLSConfig     `toml:"tls"`
	Lease   LeaseConfig   `toml:"lease"`
	Mailbox MailboxConfig `toml:"mailbox"`
	Renewal RenewalConfig `toml:"renewal"`
	Txn     TxnConfig     `toml:"txn"`
	KV      KVConfig      `toml:"kv"`
	Lock    LockConfig    `toml:"lock"`
	Lookup  LookupConfig  `toml:"lookup"`
	LDS     LDSConfig     `toml:"lds"`
	Raftcfg RaftConfig    `toml:"raft-tuning"`
	Cluster ClusterConfig `toml:"cluster"`
}

// ClusterConfig tunes membership.
type ClusterConfig struct {
	// Bootstrap makes a node with no state and no Join start a cluster of
	// its own. Without it such a node waits until a member adds it
	// (djinn member add).
	Bootstrap bool `toml:"bootstrap"`
	// MaxLag is how many log entries a member may be behind the leader
	// and still count as caught up: a joining member is promoted to voter
	// within it, reported healthy within it, and serves reads that allow
	// staleness only within it.
	MaxLag uint64 `toml:"max-lag"`
}

// TLSConfig secures the client and peer ports.
type TLSConfig struct {
	Cert string `toml:"cert"` // PEM certificate of this server
	Key  string `toml:"key"`  // PEM private key
	// CA verifies peers' and, with ClientAuth, clients' certificates.
	CA         string `toml:"ca"`
	ClientAuth bool   `toml:"client-auth"` // require client certificates (mutual TLS)
}

// LeaseConfig tunes the lessor.
type LeaseConfig struct {
	// Checkpoint is the horizon slack: how much longer than granted a lease
	// may live after a failover or restart, and about how often busy leases
	// are checkpointed.
	Checkpoint  Duration `toml:"checkpoint"`
	ExpiryBatch int      `toml:"expiry-batch"`
	ExpiryRate  int      `toml:"expiry-rate"`
}

// MailboxConfig tunes the event mailbox.
type MailboxConfig struct {
	Enabled       bool     `toml:"enabled"`
	DefaultLease  Duration `toml:"default-lease"`
	MaxLease      Duration `toml:"max-lease"`
	MaxStored     int      `toml:"max-stored"`
	MaxEventBytes int      `toml:"max-event-bytes"`
	// MaxRegistrations bounds live registrations.
	MaxRegistrations int `toml:"max-registrations"`
}

// RenewalConfig tunes the lease renewal service.
type RenewalConfig struct {
	Enabled      bool     `toml:"enabled"`
	DefaultLease Duration `toml:"default-lease"` // set lease granted for Any
	MaxLease     Duration `toml:"max-lease"`     // longest set lease
	MaxSets      int      `toml:"max-sets"`
	// MaxLeases bounds the client leases of all sets.
	MaxLeases int `toml:"max-leases"`
}

// TxnConfig tunes the transaction manager.
type TxnConfig struct {
	Enabled      bool     `toml:"enabled"`
	DefaultLease Duration `toml:"default-lease"` // transaction lease granted for Any
	MaxLease     Duration `toml:"max-lease"`
	MaxActive    int      `toml:"max-active"`
	// Abandon is how long a participant may stay unreachable before it is
	// reported (it is still retried).
	Abandon Duration `toml:"abandon"`
}

// LockConfig tunes the lock service.
type LockConfig struct {
	Enabled           bool     `toml:"enabled"`
	DefaultSetLease   Duration `toml:"default-set-lease"` // lock set lease granted for Any
	MaxSetLease       Duration `toml:"max-set-lease"`
	DefaultOwnerLease Duration `toml:"default-owner-lease"` // lock owner lease granted for Any
	MaxOwnerLease     Duration `toml:"max-owner-lease"`
	MaxSets           int      `toml:"max-sets"`
	MaxOwners         int      `toml:"max-owners"`
}

// LookupConfig tunes the lookup service and its discovery.
type LookupConfig struct {
	Enabled bool `toml:"enabled"`
	// Groups are the registrar's member groups ("" is the public group).
	Groups []string `toml:"groups"`
	// Discovery is the unicast discovery address ("" turns discovery off).
	Discovery string `toml:"discovery"`
	// Multicast turns on multicast announcements and answers to multicast
	// requests, on Interfaces (all multicast-capable ones when empty).
	Multicast  bool     `toml:"multicast"`
	Interfaces []string `toml:"interfaces"`
	// Announce is the announcement interval.
	Announce Duration `toml:"announce"`
	MaxItems int      `toml:"max-items"`
}

// LDSConfig tunes the lookup discovery service.
type LDSConfig struct {
	Enabled      bool     `toml:"enabled"`
	DefaultLease Duration `toml:"default-lease"` // registration lease granted for Any
	MaxLease     Duration `toml:"max-lease"`
	// MaxRegistrations bounds the registrations held.
	MaxRegistrations int `toml:"max-registrations"`
	// Multicast runs group discovery by multicast on Interfaces (all
	// multicast-capable ones when empty); without it lookup services are
	// found at the registrations' locators only.
	Multicast  bool     `toml:"multicast"`
	Interfaces []string `toml:"interfaces"`
	// Grace is how long a new leader waits for the lookup services known
	// before to be found again, and how long one a client discarded may
	// take to be found again, before they are discarded as lost (0: three
	// of the lookup service's announcement intervals).
	Grace Duration `toml:"grace"`
}

// KVConfig turns the reference key/value participant on or off.
type KVConfig struct {
	Enabled bool `toml:"enabled"`
}

// The bounds of RaftConfig.WALSegmentSize.
const (
	MinWALSegmentSize = 64 << 10
	MaxWALSegmentSize = 1 << 30
)

// RaftConfig tunes replication.
type RaftConfig struct {
	HeartbeatTimeout  Duration `toml:"heartbeat-timeout"`
	ElectionTimeout   Duration `toml:"election-timeout"`
	SnapshotInterval  Duration `toml:"snapshot-interval"`
	SnapshotThreshold uint64   `toml:"snapshot-threshold"`
	// WALSegmentSize is the size in bytes at which the log starts a new
	// segment file; compaction removes whole segments.
	WALSegmentSize int `toml:"wal-segment-size"`
}

// Duration is a time.Duration that reads from TOML and the environment as
// "30s", "forever" or "any".
type Duration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := djinn.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(djinn.FormatDuration(time.Duration(d))), nil
}

// Default returns the configuration `djinn serve` runs with no flags.
func Default() Config {
	return Config{
		DataDir:  "djinn-data",
		Listen:   "127.0.0.1:4161",
		Admin:    "127.0.0.1:4162",
		Raft:     "127.0.0.1:4163",
		LogLevel: "info",
		Lease:    LeaseConfig{Checkpoint: Duration(30 * time.Second), ExpiryBatch: 1000, ExpiryRate: 20},
		Mailbox: MailboxConfig{
			Enabled: true, DefaultLease: Duration(5 * time.Minute), MaxLease: Duration(time.Hour),
			MaxStored: 10000, MaxEventBytes: 64 << 10, MaxRegistrations: 2_000_000,
		},
		Renewal: RenewalConfig{
			Enabled: true, DefaultLease: Duration(time.Hour), MaxLease: Duration(24 * time.Hour),
			MaxSets: 1_000_000, MaxLeases: 10_000_000,
		},
		Txn: TxnConfig{
			Enabled: true, DefaultLease: Duration(time.Minute), MaxLease: Duration(time.Hour),
			MaxActive: 1_000_000, Abandon: Duration(10 * time.Minute),
		},
		KV: KVConfig{Enabled: true},
		Lookup: LookupConfig{
			Enabled: true, Groups: []string{""}, Discovery: "127.0.0.1:4160", Multicast: false,
			Announce: Duration(2 * time.Minute), MaxItems: 1_000_000,
		},
		LDS: LDSConfig{
			Enabled: true, DefaultLease: Duration(10 * time.Minute), MaxLease: Duration(time.Hour), MaxRegistrations: 100_000,
		},
		Lock: LockConfig{
			Enabled: true, DefaultSetLease: Duration(djinn.Forever), MaxSetLease: Duration(djinn.Forever),
			DefaultOwnerLease: Duration(time.Minute), MaxOwnerLease: Duration(24 * time.Hour),
			MaxSets: 10_000_000, MaxOwners: 1_000_000,
		},
		Raftcfg: RaftConfig{
			HeartbeatTimeout: Duration(500 * time.Millisecond), ElectionTimeout: Duration(500 * time.Millisecond),
			SnapshotInterval: Duration(30 * time.Second), SnapshotThreshold: 65536, WALSegmentSize: 64 << 20,
		},
		Cluster: ClusterConfig{Bootstrap: true, MaxLag: 1024},
	}
}

// LoadFile overlays a TOML file on c. Unknown keys are an error naming them.
func (c *Config) LoadFile(path string) error {
	md, err := toml.DecodeFile(path, c)
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		keys := make([]string, len(un))
		for i, k := range un {
			keys[i] = k.String()
		}
		return djinn.Errorf(djinn.InvalidArgument, "config file %s: unknown keys %s", path, strings.Join(keys, ", "))
	}
	return nil
}

// LoadEnv overlays DJINN_* variables from environ (os.Environ() form).
// A variable that names no key, or whose value does not parse, is an error.
func (c *Config) LoadEnv(environ []string) error {
	fields := map[string]reflect.Value{}
	collectFields(reflect.ValueOf(c).Elem(), "", fields)
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "DJINN_") {
			continue
		}
		key := strings.TrimPrefix(name, "DJINN_")
		f, ok := fields[key]
		if !ok {
			continue // other DJINN_ variables (e.g. the CLI's DJINN_SERVER)
		}
		if err := setField(f, val); err != nil {
			return djinn.Errorf(djinn.InvalidArgument, "environment %s=%q: %v", name, val, err)
		}
	}
	return nil
}

func collectFields(v reflect.Value, prefix string, out map[string]reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("toml")
		if tag == "" {
			continue
		}
		name := prefix + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(tag))
		if f := v.Field(i); f.Kind() == reflect.Struct {
			collectFields(f, name+"_", out)
		} else {
			out[name] = f
		}
	}
}

func setField(f reflect.Value, s string) error {
	if u, ok := f.Addr().Interface().(interface{ UnmarshalText([]byte) error }); ok {
		return u.UnmarshalText([]byte(s))
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("not a boolean")
		}
		f.SetBool(b)
	case reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		f.SetInt(int64(n))
	case reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("not a non-negative integer")
		}
		f.SetUint(n)
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported type %s", f.Type())
		}
		// Comma-separated; "" is the one empty string (the public group).
		f.Set(reflect.ValueOf(strings.Split(s, ",")))
	default:
		return fmt.Errorf("unsupported type %s", f.Kind())
	}
	return nil
}

// Environ is os.Environ, named for tests.
var Environ = os.Environ

// Check validates the configuration, naming the first bad value.
func (c *Config) Check() error {
	if c.DataDir == "" {
		return djinn.Errorf(djinn.InvalidArgument, "data-dir: must not be empty")
	}
	for _, a := range []struct{ name, v string }{{"listen", c.Listen}, {"admin", c.Admin}, {"raft", c.Raft}} {
		if err := djinn.CheckEndpoint(a.v); err != nil {
			return djinn.Errorf(djinn.InvalidArgument, "%s: %v", a.name, err)
		}
	}
	if _, err := client.SplitEndpoints(c.Join); err != nil {
		return djinn.Errorf(djinn.InvalidArgument, "join: %v", err)
	}
	for _, a := range []struct{ name, v string }{{"advertise", c.Advertise}, {"raft-advertise", c.RaftAdvertise}} {
		if a.v == "" {
			continue
		}
		if err := djinn.CheckEndpoint(a.v); err != nil {
			return djinn.Errorf(djinn.InvalidArgument, "%s: %v", a.name, err)
		}
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return djinn.Errorf(djinn.InvalidArgument, "tls: cert and key go together (cert %q, key %q)", c.TLS.Cert, c.TLS.Key)
	}
	if c.TLS.ClientAuth && c.TLS.CA == "" {
		return djinn.Errorf(djinn.InvalidArgument, "tls client-auth: needs a CA to verify clients")
	}
	if c.TLS.ClientAuth && c.TLS.Cert == "" {
		return djinn.Errorf(djinn.InvalidArgument, "tls client-auth: needs the server's cert and key")
	}
	if c.Mailbox.MaxStored <= 0 {
		return djinn.Errorf(djinn.InvalidArgument, "mailbox max-stored %d: must be positive", c.Mailbox.MaxStored)
	}
	if cp := time.Duration(c.Lease.Checkpoint); cp < 100*time.Millisecond || cp == djinn.Forever {
		return djinn.Errorf(djinn.InvalidArgument, "lease checkpoint %s: want at least 100ms", djinn.FormatDuration(cp))
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"mailbox max-event-bytes", c.Mailbox.MaxEventBytes},
		{"mailbox max-registrations", c.Mailbox.MaxRegistrations},
		{"renewal max-sets", c.Renewal.MaxSets},
		{"renewal max-leases", c.Renewal.MaxLeases},
		{"txn max-active", c.Txn.MaxActive},
		{"lock max-sets", c.Lock.MaxSets},
		{"lock max-owners", c.Lock.MaxOwners},
		{"lookup max-items", c.Lookup.MaxItems},
		{"lds max-registrations", c.LDS.MaxRegistrations},
		{"lease expiry-batch", c.Lease.ExpiryBatch},
		{"lease expiry-rate", c.Lease.ExpiryRate},
	} {
		if n.v <= 0 {
			return djinn.Errorf(djinn.InvalidArgument, "%s %d: must be positive", n.name, n.v)
		}
	}
	for _, p := range []struct {
		name     string
		def, max Duration
	}{
		{"lock default-set-lease, max-set-lease", c.Lock.DefaultSetLease, c.Lock.MaxSetLease},
		{"lock default-owner-lease, max-owner-lease", c.Lock.DefaultOwnerLease, c.Lock.MaxOwnerLease},
		{"lds default-lease, max-lease", c.LDS.DefaultLease, c.LDS.MaxLease},
	} {
		if def, max := time.Duration(p.def), time.Duration(p.max); def <= 0 || max <= 0 || def > max {
			return djinn.Errorf(djinn.InvalidArgument, "%s %s, %s: want 0 < default <= max", p.name, djinn.FormatDuration(def), djinn.FormatDuration(max))
		}
	}
	if g := time.Duration(c.LDS.Grace); g < 0 {
		return djinn.Errorf(djinn.InvalidArgument, "lds grace %s: must not be negative", djinn.FormatDuration(g))
	}
	def, max := time.Duration(c.Mailbox.DefaultLease), time.Duration(c.Mailbox.MaxLease)
	if def <= 0 || max <= 0 || def > max {
		return djinn.Errorf(djinn.InvalidArgument, "mailbox default-lease %s max-lease %s: want 0 < default <= max",
			djinn.FormatDuration(def), djinn.FormatDuration(max))
	}
	def, max = time.Duration(c.Renewal.DefaultLease), time.Duration(c.Renewal.MaxLease)
	if def <= 0 || max <= 0 || def > max {
		return djinn.Errorf(djinn.InvalidArgument, "renewal default-lease %s max-lease %s: want 0 < default <= max",
			djinn.FormatDuration(def), djinn.FormatDuration(max))
	}
	def, max = time.Duration(c.Txn.DefaultLease), time.Duration(c.Txn.MaxLease)
	if def <= 0 || max <= 0 || def > max {
		return djinn.Errorf(djinn.InvalidArgument, "txn default-lease %s max-lease %s: want 0 < default <= max",
			djinn.FormatDuration(def), djinn.FormatDuration(max))
	}
	if a := time.Duration(c.Txn.Abandon); a <= 0 {
		return djinn.Errorf(djinn.InvalidArgument, "txn abandon %s: must be positive", djinn.FormatDuration(a))
	}
	hb, el := time.Duration(c.Raftcfg.HeartbeatTimeout), time.Duration(c.Raftcfg.ElectionTimeout)
	if hb < 10*time.Millisecond || hb == djinn.Forever {
		return djinn.Errorf(djinn.InvalidArgument, "raft-tuning heartbeat-timeout %s: want at least 10ms", djinn.FormatDuration(hb))
	}
	if el < hb || el == djinn.Forever {
		return djinn.Errorf(djinn.InvalidArgument, "raft-tuning election-timeout %s: want at least the heartbeat timeout %s", djinn.FormatDuration(el), hb)
	}
	if si := time.Duration(c.Raftcfg.SnapshotInterval); si <= 0 || si == djinn.Forever {
		return djinn.Errorf(djinn.InvalidArgument, "raft-tuning snapshot-interval %s: must be positive", djinn.FormatDuration(si))
	}
	if n := c.Raftcfg.WALSegmentSize; n < MinWALSegmentSize || n > MaxWALSegmentSize {
		return djinn.Errorf(djinn.InvalidArgument, "raft-tuning wal-segment-size %d: want %d (64 KiB) to %d (1 GiB) bytes", n, MinWALSegmentSize, MaxWALSegmentSize)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return djinn.Errorf(djinn.InvalidArgument, "log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	return nil
}
