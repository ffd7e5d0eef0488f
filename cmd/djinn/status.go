package main

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

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
}

func viewStatus(st *djinnpb.StatusResponse) statusView {
	v := statusView{
		ServiceID: fmt.Sprintf("%x", st.ServiceId), Node: st.NodeId, State: st.State, Leader: st.LeaderId,
		LeaderAt: st.LeaderAddress, Applied: jsonUint(st.AppliedIndex), Services: st.Services, Counts: st.Counts,
	}
	if r, err := client.RefFromProto("landlord", st.Landlord); err == nil {
		v.Landlord = r.String()
	}
	if r, err := client.RefFromProto("mailbox", st.Mailbox); err == nil {
		v.Mailbox = r.String()
	}
	return v
}

func printStatus(w io.Writer, v statusView) {
	fmt.Fprintf(w, "service   %s\nnode      %s (%s)\nleader    %s at %s\napplied   %s\n", v.ServiceID, v.Node, v.State, v.Leader, v.LeaderAt, v.Applied)
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
	return &cobra.Command{
		Use:   "status",
		Short: "Show a server's node, leader, services and counts, and every member's health",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := adminStatus(cmd.Context(), c)
			if err != nil {
				return err
			}
			v := viewStatus(st)
			if ms, err := c.Members(cmd.Context(), true); err == nil {
				v.Members = viewMembers(ms)
			} else {
				for _, m := range st.Members {
					e := err.Error()
					v.Members = append(v.Members, memberView{Node: m.NodeId, Raft: m.RaftAddress, GRPC: m.GrpcAddress, Voter: m.Voter, Applied: "0", Error: &e})
				}
			}
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printStatus(w, v) })
		},
	}
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
