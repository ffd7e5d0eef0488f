package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

func newStatus(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show a server's node, leader, services and counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := djinnpb.NewAdminClient(c.ClientConn()).Status(cmd.Context(), &djinnpb.StatusRequest{})
			if err != nil {
				return err
			}
			type member struct {
				Node  string `json:"node"`
				Raft  string `json:"raft"`
				GRPC  string `json:"grpc"`
				Voter bool   `json:"voter"`
			}
			out := struct {
				ServiceID string           `json:"service_id"`
				Node      string           `json:"node"`
				State     string           `json:"state"`
				Leader    string           `json:"leader"`
				LeaderAt  string           `json:"leader_address"`
				Applied   uint64           `json:"applied_index"`
				Services  []string         `json:"services"`
				Counts    map[string]int64 `json:"counts"`
				Members   []member         `json:"members"`
				Landlord  string           `json:"landlord,omitempty"`
				Mailbox   string           `json:"mailbox,omitempty"`
			}{
				ServiceID: fmt.Sprintf("%x", st.ServiceId), Node: st.NodeId, State: st.State, Leader: st.LeaderId,
				LeaderAt: st.LeaderAddress, Applied: st.AppliedIndex, Services: st.Services, Counts: st.Counts,
			}
			for _, m := range st.Members {
				out.Members = append(out.Members, member{m.NodeId, m.RaftAddress, m.GrpcAddress, m.Voter})
			}
			if r, err := client.RefFromProto("landlord", st.Landlord); err == nil {
				out.Landlord = r.String()
			}
			if r, err := client.RefFromProto("mailbox", st.Mailbox); err == nil {
				out.Mailbox = r.String()
			}
			return g.print(cmd.OutOrStdout(), out, func(w io.Writer) {
				fmt.Fprintf(w, "service   %s\nnode      %s (%s)\nleader    %s at %s\napplied   %d\n", out.ServiceID, out.Node, out.State, out.Leader, out.LeaderAt, out.Applied)
				fmt.Fprintf(w, "services  %v\n", out.Services)
				if out.Landlord != "" {
					fmt.Fprintf(w, "landlord  %s\n", out.Landlord)
				}
				if out.Mailbox != "" {
					fmt.Fprintf(w, "mailbox   %s\n", out.Mailbox)
				}
				keys := make([]string, 0, len(out.Counts))
				for k := range out.Counts {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					fmt.Fprintf(w, "%-22s %d\n", k, out.Counts[k])
				}
				for _, m := range out.Members {
					fmt.Fprintf(w, "member    %s raft=%s grpc=%s voter=%v\n", m.Node, m.Raft, m.GRPC, m.Voter)
				}
			})
		},
	}
}
