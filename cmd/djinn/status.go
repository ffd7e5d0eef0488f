package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

type statusView struct {
	ServiceID string           `json:"service_id"`
	Node      string           `json:"node"`
	State     string           `json:"state"`
	Leader    string           `json:"leader"`
	LeaderAt  string           `json:"leader_address"`
	Applied   string           `json:"applied_index"`
	Services  []string         `json:"services"`
	Counts    map[string]int64 `json:"counts"`
	Members   []memberView     `json:"members"`
	Landlord  string           `json:"landlord,omitempty"`
	Mailbox   string           `json:"mailbox,omitempty"`
	// The cluster's rules version as this member applied the log, the
	// highest its binary supports, and why it stopped applying (docs:
	// Upgrading).
	Rules    uint32 `json:"rules_version"`
	RulesMax uint32 `json:"rules_max"`
	Stopped  string `json:"stopped,omitempty"`
	// ready: the cluster initialised and its leader's services serve.
	ready     bool
	serviceID djinn.ID
}

func viewStatus(st *djinnpb.StatusResponse) statusView {
	v := statusView{
		ServiceID: fmt.Sprintf("%x", st.ServiceId), Node: st.NodeId, State: st.State, Leader: st.LeaderId,
		LeaderAt: st.LeaderAddress, Applied: jsonUint(st.AppliedIndex), Services: st.Services, Counts: st.Counts,
		Rules: st.GetRulesVersion(), RulesMax: st.GetRulesMax(), Stopped: st.GetStopped(),
	}
	v.serviceID, _ = djinn.IDFromBytes("service id", st.ServiceId)
	// Until the cluster has its service id, the references name no object.
	if r, err := client.RefFromProto("landlord", st.Landlord); err == nil && !r.Service.IsZero() {
		v.Landlord = r.String()
	}
	if r, err := client.RefFromProto("mailbox", st.Mailbox); err == nil && !r.Service.IsZero() {
		v.Mailbox = r.String()
	}
	return v
}

func printStatus(w io.Writer, v statusView) {
	service, leader := v.ServiceID, v.Leader+" at "+v.LeaderAt
	if v.serviceID.IsZero() {
		service = "none yet: the first leader gives it once elected (a server started with --bootstrap=false, once added to a cluster); --wait waits until ready"
	}
	if v.Leader == "" {
		leader = "none known yet (electing, or without a quorum)"
	}
	fmt.Fprintf(w, "service   %s\nnode      %s (%s)\nleader    %s\napplied   %s\n", service, v.Node, v.State, leader, v.Applied)
	fmt.Fprintf(w, "rules     version %d (this member's binary supports up to %d)\n", v.Rules, v.RulesMax)
	if v.Stopped != "" {
		fmt.Fprintf(w, "STOPPED   %s\n", v.Stopped)
	}
	fmt.Fprintf(w, "services  %v\n", v.Services)
	if v.Landlord != "" {
		fmt.Fprintf(w, "landlord  %s\n", v.Landlord)
	}
	if v.Mailbox != "" {
		fmt.Fprintf(w, "mailbox   %s\n", v.Mailbox)
	}
	keys := make([]string, 0, len(v.Counts))
	for k := range v.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%-22s %d\n", k, v.Counts[k])
	}
	fmt.Fprintln(w)
	printMembers(w, v.Members)
}

func (g *globals) statusCmd() *cobra.Command {
	var waitS string
	cmd := &cobra.Command{
		Use:   "status [--wait D]",
		Short: "Show a server's node, leader, services and counts, and every member's health",
		Long: "Show a server's node, leader, services and counts, and every member's health.\n\n" +
			"With --wait, a server that does not answer yet (starting, or not yet listening), or is not ready\n" +
			"(no leader yet, the cluster not yet initialised, or the leader's services still starting), is asked\n" +
			"again until it is ready or --wait passes: scripts start a server in the background, then\n" +
			"djinn status --wait 30s.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wait, err := parseWait(waitS)
			if err != nil {
				return usageError{err}
			}
			v, err := g.statusUntil(cmd.Context(), wait)
			if err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printStatus(w, v) })
		},
	}
	waitFlag(cmd, &waitS, "ask again until the server answers and is ready, for at most this long (a Go duration); default: ask once")
	return cmd
}

// statusUntil asks for the status until the server answers and is
// ready, or wait passes (at once without wait): a server not listening yet
// is asked again, as is one still starting, by client.WaitStarted.
func (g *globals) statusUntil(ctx context.Context, wait time.Duration) (statusView, error) {
	if wait == 0 {
		return g.status(ctx)
	}
	v, err := client.WaitStarted(ctx, wait, nil, g.readyStatus)
	if errors.Is(err, client.ErrNotReady) {
		err = fmt.Errorf("%w; djinn status --server %s, without --wait, shows what it lacks, and djinn member ls each member's health", err, g.server)
	}
	return v, err
}

// readyStatus is the status once the server is ready, else an error that
// is client.ErrNotReady saying what it lacks.
func (g *globals) readyStatus(ctx context.Context) (statusView, error) {
	v, err := g.status(ctx)
	if err != nil || v.ready {
		return v, err
	}
	why := "its leader's services are still starting"
	switch {
	case v.serviceID.IsZero():
		why = "its cluster has no service id yet (its first leader gives it one once elected; a server started with --bootstrap=false, once added to a cluster)"
	case v.Leader == "":
		why = "it knows no leader (electing, or without a quorum)"
	}
	return v, notReadyStatus{djinn.Errorf(djinn.Unavailable, "%s answers but is not ready: %s", g.server, why)}
}

// notReadyStatus is the error of a server that answers its status but is
// not ready: Unavailable, and client.ErrNotReady.
type notReadyStatus struct{ error }

func (e notReadyStatus) Unwrap() []error { return []error{e.error, client.ErrNotReady} }

// leaderReady reports whether the server that answered st is ready and,
// if it follows, whether its leader is too: a follower is ready once it
// knows a leader, and the leader once its services serve.
func leaderReady(ctx context.Context, c *client.Client, st *djinnpb.StatusResponse) bool {
	if !st.GetReady() || st.GetState() == "Leader" {
		return st.GetReady()
	}
	conn, err := c.Conn(st.GetLeaderAddress())
	if err != nil {
		return false
	}
	lst, err := djinnpb.NewAdminClient(conn).Status(ctx, &djinnpb.StatusRequest{})
	return err == nil && lst.GetReady() && lst.GetState() == "Leader"
}

// status asks the first --server address for its status and every
// member's health.
func (g *globals) status(ctx context.Context) (statusView, error) {
	c, err := g.dial(ctx)
	if err != nil {
		return statusView{}, err
	}
	defer c.Close()
	st, err := adminStatus(ctx, c)
	if err != nil {
		return statusView{}, err
	}
	v := viewStatus(st)
	v.ready = leaderReady(ctx, c, st)
	if ms, err := c.Members(ctx, true); err == nil {
		v.Members = viewMembers(ms)
	} else {
		for _, m := range st.Members {
			e := err.Error()
			v.Members = append(v.Members, memberView{Node: m.NodeId, Raft: m.RaftAddress, GRPC: m.GrpcAddress, Voter: m.Voter, Applied: "0", Error: &e})
		}
	}
	return v, nil
}

// adminStatus asks the member c was dialled at (the first --server
// address) what it is doing.
func adminStatus(ctx context.Context, c *client.Client) (*djinnpb.StatusResponse, error) {
	conn, err := c.Conn(c.Addr())
	if err != nil {
		return nil, err
	}
	return djinnpb.NewAdminClient(conn).Status(ctx, &djinnpb.StatusRequest{})
}
