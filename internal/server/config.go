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
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/kv"
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
	// ProfileContention turns on the runtime's block and mutex profiles,
	// served on the admin port at /debug/pprof/block and /debug/pprof/mutex
	// (off by default: sampling every contended wait costs CPU).
	ProfileContention bool `toml:"profile-contention"`
	// HandshakeTimeout bounds how long a new connection to the client or
	// the Raft port may take to complete its handshakes (TLS, then HTTP/2
	// on the client port) before it is closed.
	HandshakeTimeout Duration `toml:"handshake-timeout"`
	// ConnectTimeout bounds an attempt of this server's to connect to
	// another member, a listener or a participant (TCP, TLS and HTTP/2
	// handshakes); later attempts after failures get at least their
	// backoff.
	ConnectTimeout Duration `toml:"connect-timeout"`
	// KeepaliveTime is the idle time after which this server's
	// connections ping their peer — its outgoing ones and its clients' —
	// and KeepaliveTimeout how long the answer may take before the
	// connection is closed: a peer gone silent (powered off, cut off) is
	// found within their sum.
	KeepaliveTime    Duration `toml:"keepalive-time"`
	KeepaliveTimeout Duration `toml:"keepalive-timeout"`
	// KeepaliveMinTime is the least interval between a client's pings
	// that the gRPC port accepts; a client that pings more often is sent
	// GOAWAY and closed.
	KeepaliveMinTime Duration `toml:"keepalive-min-time"`

	TLS        TLSConfig      `toml:"tls"`
	Security   SecurityConfig `toml:"security"`
	Quota      QuotaConfig    `toml:"quota"`
	Lease      LeaseConfig    `toml:"lease"`
	Mailbox    MailboxConfig  `toml:"mailbox"`
	Renewal    RenewalConfig  `toml:"renewal"`
	Txn        TxnConfig      `toml:"txn"`
	KV         KVConfig       `toml:"kv"`
	Lock       LockConfig     `toml:"lock"`
	Lookup     LookupConfig   `toml:"lookup"`
	LDS        LDSConfig      `toml:"lds"`
	LookupJoin JoinConfig     `toml:"lookup-join"`
	Raftcfg    RaftConfig     `toml:"raft-tuning"`
	Cluster    ClusterConfig  `toml:"cluster"`
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

	// rulesMax, when set (tests of the upgrade path), stands for the
	// highest rules version this binary supports.
	rulesMax uint32
}

// TLSConfig secures the client and peer ports (tls.go).
type TLSConfig struct {
	Cert string `toml:"cert"` // PEM certificate of this server's client port
	Key  string `toml:"key"`  // PEM private key
	// PeerCert and PeerKey are this node's peer certificate, which
	// carries a URI SAN djinn-peer://NODE-ID: the Raft port's, and what
	// the server presents when it calls others (default: Cert and Key,
	// which then must carry the SAN).
	PeerCert string `toml:"peer-cert"`
	PeerKey  string `toml:"peer-key"`
	// CA verifies peers' and clients' certificates.
	CA string `toml:"ca"`
	// CRL holds PEM revocation lists a CA of CA signed: the certificates
	// they list are refused, on calls and peer connections (README
	// Security). Read again when it changes, as the certificates are.
	CRL        string `toml:"crl"`
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

// KVConfig turns the reference key/value participant on or off, and
// bounds what it holds.
type KVConfig struct {
	Enabled bool `toml:"enabled"`
	// MaxBytes bounds the bytes of keys and values the store holds in
	// memory, committed or written under transactions not yet decided
	// (0: kv.DefaultMaxBytes); a put past it gets RESOURCE_EXHAUSTED.
	MaxBytes int64 `toml:"max-bytes"`
	// MaxBytesPerPrincipal bounds, under mutual TLS, what each principal's
	// keys and values take of MaxBytes, so that one principal cannot fill
	// the store and starve the others (0: MaxBytes / KVPrincipalShare).
	// Without mutual TLS every caller is the one anonymous principal, and
	// it applies only when set.
	MaxBytesPerPrincipal int64 `toml:"max-bytes-per-principal"`
}

// KVPrincipalShare is the default share of [kv] max-bytes one principal
// may hold: a sixteenth leaves fifteen sixteenths to the others whatever
// one principal does, and it takes sixteen principals filling their
// shares to fill the store, while one principal may still hold 64 MiB of
// the default 1 GiB.
const KVPrincipalShare = 16

func (c *KVConfig) check() error {
	if c.MaxBytes < 0 {
		return djinn.Errorf(djinn.InvalidArgument, "kv max-bytes %d: must not be negative (0 is the default, %d)", c.MaxBytes, kv.DefaultMaxBytes)
	}
	if c.MaxBytesPerPrincipal < 0 {
		return djinn.Errorf(djinn.InvalidArgument, "kv max-bytes-per-principal %d: must not be negative (0 is the default, max-bytes / %d)", c.MaxBytesPerPrincipal, KVPrincipalShare)
	}
	return nil
}

// perPrincipal returns the bound on each principal's keys and values, as
// kv.Config.MaxBytesPerNamespace takes it (0: none of its own).
func (c *KVConfig) perPrincipal(mutual bool) int64 {
	switch {
	case c.MaxBytesPerPrincipal > 0:
		return c.MaxBytesPerPrincipal
	case !mutual:
		return 0
	case c.MaxBytes > 0:
		return max(c.MaxBytes/KVPrincipalShare, 1)
	}
	return kv.DefaultMaxBytes / KVPrincipalShare
}

// The bounds of RaftConfig.WALSegmentSize.
const (
	MinWALSegmentSize = 64 << 10
	MaxWALSegmentSize = 1 << 30
)

// minSnapshotInterval is the least snapshot interval Raft takes: a
// shorter one would pass Check and then fail the node's start with Raft's
// "SnapshotInterval is too low", naming no configuration key.
const minSnapshotInterval = 5 * time.Millisecond

// RaftConfig tunes replication.
type RaftConfig struct {
	HeartbeatTimeout  Duration `toml:"heartbeat-timeout"`
	ElectionTimeout   Duration `toml:"election-timeout"`
	SnapshotInterval  Duration `toml:"snapshot-interval"`
	SnapshotThreshold uint64   `toml:"snapshot-threshold"`
	// TrailingLogs is how many log entries a snapshot leaves behind it, so
	// that a member that fell behind by fewer catches up from the log
	// rather than from a snapshot the leader sends.
	TrailingLogs uint64 `toml:"trailing-logs"`
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
		// Long enough for a slow client on a slow link, short enough that
		// connections that never handshake do not pile up.
		HandshakeTimeout: Duration(10 * time.Second),
		ConnectTimeout:   Duration(client.DefaultConnectTimeout),
		KeepaliveTime:    Duration(client.DefaultKeepaliveTime),
		KeepaliveTimeout: Duration(client.DefaultKeepaliveTimeout),
		KeepaliveMinTime: Duration(client.DefaultKeepaliveMinTime),
		Lease:            LeaseConfig{Checkpoint: Duration(30 * time.Second), ExpiryBatch: 1000, ExpiryRate: 20},
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
			MaxActive: 1_000_000, MaxRemembered: 1_000_000, Abandon: Duration(10 * time.Minute),
		},
		KV: KVConfig{Enabled: true},
		Lookup: LookupConfig{
			Enabled: true, Groups: []string{""}, Discovery: "127.0.0.1:4160", Multicast: false,
			Announce: Duration(2 * time.Minute), MaxItems: 1_000_000,
		},
		LDS: LDSConfig{
			Enabled: true, DefaultLease: Duration(10 * time.Minute), MaxLease: Duration(time.Hour), MaxRegistrations: 100_000,
		},
		LookupJoin: JoinConfig{Enabled: true, Own: true, Groups: []string{""}},
		Lock: LockConfig{
			Enabled: true, DefaultSetLease: Duration(djinn.Forever), MaxSetLease: Duration(djinn.Forever),
			DefaultOwnerLease: Duration(time.Minute), MaxOwnerLease: Duration(24 * time.Hour),
			MaxSets: 10_000_000, MaxOwners: 1_000_000,
		},
		Raftcfg: RaftConfig{
			HeartbeatTimeout: Duration(500 * time.Millisecond), ElectionTimeout: Duration(500 * time.Millisecond),
			SnapshotInterval: Duration(30 * time.Second), SnapshotThreshold: 65536, TrailingLogs: 16384, WALSegmentSize: 64 << 20,
		},
		Cluster: ClusterConfig{Bootstrap: true, MaxLag: 1024},
		Quota:   defaultQuota(),
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
	case reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		f.SetInt(n)
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

// Check validates the configuration, naming the first bad value: the
// server's own settings, then every section that checks itself (each
// service's, beside its part).
func (c *Config) Check() error {
	if err := c.checkServer(); err != nil {
		return err
	}
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		if sec, ok := v.Field(i).Addr().Interface().(interface{ check() error }); ok {
			if err := sec.check(); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkServer checks the settings of the server itself: its data, its
// addresses, TLS, logging.
func (c *Config) checkServer() error {
	if c.DataDir == "" {
		return djinn.Errorf(djinn.InvalidArgument, "data-dir: must not be empty")
	}
	if c.NodeID != "" {
		if err := replica.CheckNodeID(c.NodeID); err != nil {
			return err
		}
	}
	for _, a := range []struct{ name, v string }{{"listen", c.Listen}, {"admin", c.Admin}, {"raft", c.Raft}} {
		if err := djinn.CheckListenAddress(a.v); err != nil {
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
	if err := c.checkLinks(); err != nil {
		return err
	}
	if err := c.TLS.check(); err != nil {
		return err
	}
	if err := c.checkSecurity(); err != nil {
		return err
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return djinn.Errorf(djinn.InvalidArgument, "log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// checkLinks checks the timeouts of connections: handshakes, connection
// attempts, keepalive.
func (c *Config) checkLinks() error {
	for _, d := range []struct {
		name string
		v    Duration
	}{{"handshake-timeout", c.HandshakeTimeout}, {"connect-timeout", c.ConnectTimeout}, {"keepalive-timeout", c.KeepaliveTimeout}, {"keepalive-min-time", c.KeepaliveMinTime}} {
		if v := time.Duration(d.v); v <= 0 || v == djinn.Forever {
			return djinn.Errorf(djinn.InvalidArgument, "%s %s: must be positive", d.name, djinn.FormatDuration(v))
		}
	}
	kt, min := time.Duration(c.KeepaliveTime), time.Duration(c.KeepaliveMinTime)
	if kt < client.MinKeepaliveTime || kt == djinn.Forever {
		return djinn.Errorf(djinn.InvalidArgument, "keepalive-time %s: want at least %s (gRPC pings no more often)", djinn.FormatDuration(kt), client.MinKeepaliveTime)
	}
	if min > kt {
		return djinn.Errorf(djinn.InvalidArgument, "keepalive-min-time %s: want at most keepalive-time %s, or members configured alike close each other's connections", djinn.FormatDuration(min), djinn.FormatDuration(kt))
	}
	return nil
}

func (c *TLSConfig) check() error {
	if (c.Cert == "") != (c.Key == "") {
		return djinn.Errorf(djinn.InvalidArgument, "tls: cert and key go together (cert %q, key %q)", c.Cert, c.Key)
	}
	if (c.PeerCert == "") != (c.PeerKey == "") {
		return djinn.Errorf(djinn.InvalidArgument, "tls: peer-cert and peer-key go together (peer-cert %q, peer-key %q)", c.PeerCert, c.PeerKey)
	}
	if c.ClientAuth && c.CA == "" {
		return djinn.Errorf(djinn.InvalidArgument, "tls client-auth: needs a CA to verify clients")
	}
	if (c.ClientAuth || c.PeerCert != "") && c.Cert == "" {
		return djinn.Errorf(djinn.InvalidArgument, "tls client-auth and peer-cert: need the server's cert and key")
	}
	if c.Cert != "" && c.CA == "" {
		return djinn.Errorf(djinn.InvalidArgument, "tls ca: needed with a certificate, to verify the peers on the Raft port (and clients' certificates)")
	}
	if c.CRL != "" && c.Cert == "" {
		return djinn.Errorf(djinn.InvalidArgument, "tls crl %s: revocation lists need TLS: give the server's cert, key and ca too", c.CRL)
	}
	return nil
}

func (c *LeaseConfig) check() error {
	if cp := time.Duration(c.Checkpoint); cp < 100*time.Millisecond || cp == djinn.Forever {
		return djinn.Errorf(djinn.InvalidArgument, "lease checkpoint %s: want at least 100ms", djinn.FormatDuration(cp))
	}
	if err := positive("lease expiry-batch", c.ExpiryBatch); err != nil {
		return err
	}
	return positive("lease expiry-rate", c.ExpiryRate)
}

func (c *RaftConfig) check() error {
	hb, el := time.Duration(c.HeartbeatTimeout), time.Duration(c.ElectionTimeout)
	if hb < 10*time.Millisecond || hb == djinn.Forever {
		return djinn.Errorf(djinn.InvalidArgument, "raft-tuning heartbeat-timeout %s: want at least 10ms", djinn.FormatDuration(hb))
	}
	if el < hb || el == djinn.Forever {
		return djinn.Errorf(djinn.InvalidArgument, "raft-tuning election-timeout %s: want at least the heartbeat timeout %s", djinn.FormatDuration(el), hb)
	}
	if si := time.Duration(c.SnapshotInterval); si < minSnapshotInterval || si == djinn.Forever {
		return djinn.Errorf(djinn.InvalidArgument, "raft-tuning snapshot-interval %s: want at least %s", djinn.FormatDuration(si), minSnapshotInterval)
	}
	if c.TrailingLogs == 0 {
		return djinn.Errorf(djinn.InvalidArgument, "raft-tuning trailing-logs 0: must be positive (entries kept behind a snapshot)")
	}
	if n := c.WALSegmentSize; n < MinWALSegmentSize || n > MaxWALSegmentSize {
		return djinn.Errorf(djinn.InvalidArgument, "raft-tuning wal-segment-size %d: want %d (64 KiB) to %d (1 GiB) bytes", n, MinWALSegmentSize, MaxWALSegmentSize)
	}
	return nil
}

// positive refuses a count that is not positive, naming its key.
func positive(name string, v int) error {
	if v <= 0 {
		return djinn.Errorf(djinn.InvalidArgument, "%s %d: must be positive", name, v)
	}
	return nil
}

// leasePolicy refuses a lease policy unless 0 < default <= max, naming
// its keys: "name default, max" with one name, "name default max2 max"
// with two.
func leasePolicy(name, name2 string, def, max Duration) error {
	d, m := time.Duration(def), time.Duration(max)
	if d > 0 && m > 0 && d <= m {
		return nil
	}
	if name2 == "" {
		return djinn.Errorf(djinn.InvalidArgument, "%s %s, %s: want 0 < default <= max", name, djinn.FormatDuration(d), djinn.FormatDuration(m))
	}
	return djinn.Errorf(djinn.InvalidArgument, "%s %s %s %s: want 0 < default <= max", name, djinn.FormatDuration(d), name2, djinn.FormatDuration(m))
}
