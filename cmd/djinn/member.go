package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/replica"
)

// memberView is one member as the member commands print it.
type memberView struct {
	Node        string        `json:"node"`
	GRPC        string        `json:"grpc"`
	Raft        string        `json:"raft"`
	Voter       bool          `json:"voter"`
	Role        string        `json:"role"`
	Staged      bool          `json:"staged"`
	Health      string        `json:"health"`
	Applied     string        `json:"applied_index"`
	LastContact *durationJSON `json:"last_contact"` // since the leader heard from it; null: never, or not asked
	Error       *string       `json:"error"`        // null: none
	RulesMax    uint32        `json:"rules_max"`    // the highest rules version its binary supports (0: not yet known)

	applied uint64
	contact string
}

func viewMembers(ms *client.Members) []memberView {
	out := make([]memberView, 0, len(ms.Members))
	for _, m := range ms.Members {
		v := memberView{Node: m.NodeID, GRPC: m.Endpoint, Raft: m.RaftAddress, Voter: m.Voter, Role: m.Role,
			Staged: m.Staged, Health: m.Health, Applied: jsonUint(m.AppliedIndex), applied: m.AppliedIndex, RulesMax: m.RulesMax}
		if m.Error != "" {
			v.Error = &m.Error
		}
		if m.Health != "" && m.Health != "unreachable" {
			v.contact = lastContact(m.LastContact)
			if m.LastContact > 0 {
				d := jsonDuration(m.LastContact)
				v.LastContact = &d
			}
		}
		out = append(out, v)
	}
	return out
}

func lastContact(d time.Duration) string {
	switch {
	case d < 0:
		return "never"
	case d == 0:
		return "-"
	}
	return d.Round(time.Millisecond).String() + " ago"
}

// printMembers writes a table of members.
func printMembers(w io.Writer, vs []memberView) {
	fmt.Fprintf(w, "%-14s %-9s %-11s %-8s %-5s %-22s %-22s %s\n", "NODE", "ROLE", "HEALTH", "APPLIED", "RULES", "GRPC", "RAFT", "LAST CONTACT")
	for _, v := range vs {
		role := v.Role
		if v.Staged {
			role += "*"
		}
		rules := "?"
		if v.RulesMax > 0 {
			rules = fmt.Sprint(v.RulesMax)
		}
		fmt.Fprintf(w, "%-14s %-9s %-11s %-8d %-5s %-22s %-22s %s\n", v.Node, role, v.Health, v.applied, rules, v.GRPC, v.Raft, v.contact)
		if v.Error != nil {
			fmt.Fprintf(w, "%14s %s\n", "", *v.Error)
		}
	}
}

func (g *globals) memberCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "List, add and remove the members of a cluster",
		Long: "List a cluster's members with their role, health, applied index and last contact with the\n" +
			"leader; add a server started with --bootstrap=false, remove a member, or make one leave.\n" +
			"Adding, removing and leaving need the operator role.",
	}
	cmd.AddCommand(g.memberListCmd(), g.memberAddCmd(), g.memberRemoveCmd(), g.memberLeaveCmd())
	return cmd
}

func (g *globals) memberListCmd() *cobra.Command {
	health := true
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the members (a * after the role: a non-voter promoted once caught up)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			ms, err := c.Members(cmd.Context(), health)
			if err != nil {
				return err
			}
			out := struct {
				Leader  string       `json:"leader"`
				Members []memberView `json:"members"`
			}{ms.LeaderID, viewMembers(ms)}
			return g.print(cmd.OutOrStdout(), out, func(w io.Writer) { printMembers(w, out.Members) })
		},
	}
	ls.Flags().BoolVar(&health, "health", true, "ask every member how it is (role, applied index, last contact)")
	return ls
}

func (g *globals) memberAddCmd() *cobra.Command {
	var m client.NewMember
	add := &cobra.Command{
		Use:   "add NODE_ID --raft ADDR --grpc ADDR [--nonvoter]",
		Short: "Add a server as a non-voter, promoted to voter once it has caught up (unless --nonvoter)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m.NodeID = args[0]
			if err := checkNewMember(m); err != nil {
				return err
			}
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.AddMember(cmd.Context(), m); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]string{"added": m.NodeID}, func(w io.Writer) {
				fmt.Fprintf(w, "added %s; djinn member ls shows when it votes\n", m.NodeID)
			})
		},
	}
	f := add.Flags()
	f.StringVar(&m.RaftAddress, "raft", "", "the server's Raft address (its --raft-advertise or --raft)")
	f.StringVar(&m.Endpoint, "grpc", "", "the server's gRPC address (its --advertise or --listen)")
	f.BoolVar(&m.Nonvoter, "nonvoter", false, "keep it a non-voter: it receives the log but never votes")
	_ = add.MarkFlagRequired("raft")
	_ = add.MarkFlagRequired("grpc")
	return add
}

// checkNewMember checks, before anything is dialled, what the leader
// would refuse of a member to add.
func checkNewMember(m client.NewMember) error {
	if err := replica.CheckNodeID(m.NodeID); err != nil {
		return usageError{fmt.Errorf("NODE_ID: %w", err)}
	}
	if err := djinn.CheckEndpoint(m.RaftAddress); err != nil {
		return usageError{fmt.Errorf("--raft: %w", err)}
	}
	if err := djinn.CheckEndpoint(m.Endpoint); err != nil {
		return usageError{fmt.Errorf("--grpc: %w", err)}
	}
	return nil
}

func (g *globals) memberRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NODE_ID",
		Short: "Remove a member from the cluster (stop its server afterwards)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.RemoveMember(cmd.Context(), args[0]); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]string{"removed": args[0]}, func(w io.Writer) {
				fmt.Fprintf(w, "removed %s\n", args[0])
			})
		},
	}
}

func (g *globals) memberLeaveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "leave",
		Short: "Make the member at --server (the first address given) leave the cluster and stop",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.Leave(cmd.Context(), c.Addr()); err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]string{"left": c.Addr()}, func(w io.Writer) {
				fmt.Fprintf(w, "the member at %s left the cluster and stops\n", c.Addr())
			})
		},
	}
}

func (g *globals) leaderCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "leader", Short: "Leadership of a cluster"}
	cmd.AddCommand(g.leaderTransferCmd())
	return cmd
}

func (g *globals) leaderTransferCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "transfer [NODE_ID]",
		Short: "Make the leader hand leadership to NODE_ID, or to the most up-to-date voter (operator role)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			to := ""
			if len(args) == 1 {
				to = args[0]
			}
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			leader, err := c.TransferLeadership(cmd.Context(), to)
			if err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), map[string]string{"leader": leader}, func(w io.Writer) {
				if leader == "" {
					leader = "not yet known"
				}
				fmt.Fprintf(w, "leadership transferred; leader %s\n", leader)
			})
		},
	}
}
