package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionView is what djinn version prints: from the build information
// the Go toolchain records in the binary.
type versionView struct {
	Module    string  `json:"module"`
	Version   string  `json:"version"`  // the module version: v1.2.3, or (devel) for a build of a checkout
	Commit    *string `json:"commit"`   // the VCS revision of a build of a checkout; null when not recorded
	Time      *string `json:"time"`     // the revision's commit time; null when not recorded
	Modified  bool    `json:"modified"` // the checkout had changes not committed
	GoVersion string  `json:"go"`
}

// buildVersion and buildCommit are what a build that cannot record them
// itself says (go build -ldflags "-X main.buildVersion=v1.2.3 -X
// main.buildCommit=REV", as the Dockerfile does, whose build context has
// no .git).
var buildVersion, buildCommit string

func readVersion() versionView {
	v := buildInfoVersion()
	if buildVersion != "" && (v.Version == "(devel)" || v.Version == "(unknown)" || v.Version == "") {
		v.Version = buildVersion
	}
	if buildCommit != "" && v.Commit == nil {
		c := buildCommit
		v.Commit = &c
	}
	return v
}

// buildInfoVersion is what the Go toolchain recorded in the binary.
func buildInfoVersion() versionView {
	v := versionView{Module: "github.com/djinn-go/djinn", Version: "(unknown)", GoVersion: "(unknown)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.GoVersion = bi.GoVersion
	if bi.Main.Path != "" {
		v.Module, v.Version = bi.Main.Path, bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev := s.Value
			v.Commit = &rev
		case "vcs.time":
			t := s.Value
			v.Time = &t
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (g *globals) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print djinn's version: the module version, the commit it was built from, and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readVersion()
			return g.print(cmd.OutOrStdout(), v, func(w io.Writer) { printVersion(w, v) })
		},
	}
}

func printVersion(w io.Writer, v versionView) {
	fmt.Fprintf(w, "djinn %s\n", v.Version)
	if v.Commit != nil {
		modified := ""
		if v.Modified {
			modified = " (with changes not committed)"
		}
		at := ""
		if v.Time != nil {
			at = " of " + *v.Time
		}
		fmt.Fprintf(w, "commit %s%s%s\n", *v.Commit, at, modified)
	}
	fmt.Fprintf(w, "module %s\n%s\n", v.Module, v.GoVersion)
}
