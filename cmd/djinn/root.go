package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Main is the djinn command: its arguments in, its output out, its exit
// status returned.
type Main struct {
	Stdout, Stderr io.Writer
}

// The exit statuses (djinn help exit-codes).
const (
	exitOK       = 0
	exitFailed   = 1 // an error, or a negative answer: not granted, invalid, not found
	exitUsage    = 2 // the command line was not understood
	exitHelpText = `djinn exits with

  0  the command did what it was asked, and the answer is yes
  1  a negative answer — "not granted" (lock acquire --try), "invalid"
     (lock validate), "not found" (kv get, kv delete, renewal remove, lds
     discard, lookup find with no match, a lease or resource that is gone) —
     or an error: the server refused the request (an invalid argument names
     the bad value), could not be reached, or failed
  2  the command line was not understood: an unknown command or flag, a
     flag value or an argument that is not of its kind (an id that is not
     32 hex digits, a transaction id that is not a number, a duration that
     is not one), a missing or extra argument, a required flag not given

Every status but 0 comes with one line on stderr saying why (with -o json,
a JSON object: {"error": {"message": ..., "kind": ..., "exit_status": ...}}),
after whatever answer the command printed on stdout.`
)

// Run runs the command line args and returns the exit status, after
// printing the error, when there is one, on one line of stderr.
func (m Main) Run(ctx context.Context, args []string) int {
	root, g := newRoot()
	g.args = args
	root.SetArgs(args)
	root.SetOut(m.Stdout)
	root.SetErr(m.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	err = inCommandWords(err, cmd)
	err = notUTF8(err, args)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = errInterrupted
	}
	err = g.diagnose(context.WithoutCancel(ctx), err)
	code := exitStatus(err)
	if o, ok := outputArg(args); ok {
		g.output = o // also when the command line failed to parse before -o
	}
	g.printError(m.Stderr, err, code)
	return code
}

// outputArg finds -o in args, whether or not the command line parsed.
func outputArg(args []string) (string, bool) {
	out, found := "", false
	for i, a := range args {
		switch {
		case a == "--":
			return out, found
		case (a == "-o" || a == "--output") && i+1 < len(args):
			out, found = args[i+1], true
		case strings.HasPrefix(a, "-o="), strings.HasPrefix(a, "--output="):
			out, found = a[strings.IndexByte(a, '=')+1:], true
		case strings.HasPrefix(a, "-o") && len(a) > 2:
			out, found = a[2:], true
		}
	}
	return out, found
}

// notUTF8 turns gRPC's refusal to send text that is not UTF-8, which it
// meets only as it encodes a request (so nothing was sent), into the
// usage error it is, naming the arguments at fault; other errors pass.
func notUTF8(err error, args []string) error {
	if !strings.Contains(err.Error(), "string field contains invalid UTF-8") {
		return err
	}
	var bad []string
	for _, a := range args {
		if !utf8.ValidString(a) {
			bad = append(bad, fmt.Sprintf("%q", a))
		}
	}
	if len(bad) == 0 {
		return err
	}
	return usageError{fmt.Errorf("%s: not UTF-8, and djinn's names, keys, values and types are UTF-8 text: give it in UTF-8 (nothing was sent)", strings.Join(bad, ", "))}
}

// errInterrupted is the error of a command interrupted (SIGINT, SIGTERM)
// before it had its answer: what the interrupted call would have
// done is not known.
var errInterrupted = errors.New("interrupted before the answer came: what was asked may or may not have been done (show or list it to see)")

// usageError is a command line that was not understood.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// negative is a negative answer: not granted, invalid, not found.
type negative struct{ msg string }

func (e negative) Error() string { return e.msg }

// exitStatus is the exit status err ends the command with.
func exitStatus(err error) int {
	var u usageError
	if errors.As(err, &u) || strings.HasPrefix(err.Error(), "required flag(s)") ||
		strings.HasPrefix(err.Error(), "if any flags in the group") {
		return exitUsage
	}
	return exitFailed
}

// newRoot returns the djinn command with every command group, and the
// flags the client commands share. A new group is a file of its own and
// one line here.
func newRoot() (*cobra.Command, *globals) {
	g := &globals{}
	root := &cobra.Command{
		Use:           "djinn",
		Short:         "djinn: leases, remote events and the Jini services, in Go",
		Long:          rootHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddGroup(&cobra.Group{ID: "start", Title: "Run a server and look at it:"},
		&cobra.Group{ID: "services", Title: "Use its services:"},
		&cobra.Group{ID: "ops", Title: "Operate a cluster:"})
	in(root, "start",
		newServe(),
		g.client(g.statusCmd()),
		g.client(g.lsCmd()),
		g.withOutput(g.versionCmd()))
	in(root, "services",
		g.client(g.leaseCmd()),
		g.client(g.mailboxCmd()),
		g.client(g.renewalCmd()),
		g.client(g.eventsCmd()),
		g.client(g.txnCmd()),
		g.client(g.kvCmd()),
		g.client(g.lockCmd()),
		g.client(g.lookupCmd()),
		g.client(g.ldsCmd()),
		g.withOutput(g.discoverCmd()),
		g.withOutput(g.findCmd()),
		g.client(g.demoCmd()))
	in(root, "ops",
		g.client(g.memberCmd()),
		g.client(g.leaderCmd()),
		g.client(g.joinCmd()),
		g.client(g.snapshotCmd()),
		g.withOutput(g.repairCmd()),
		g.withOutput(g.tlsCmd()),
		g.client(g.benchCmd()))
	root.AddCommand(exitCodesTopic())
	root.InitDefaultCompletionCmd() // now, not at Execute, so that strictTree sees it
	strictHelp(root)
	strictTree(root, g)
	return root, g
}

// in adds commands to root under a group of its help.
func in(root *cobra.Command, group string, cmds ...*cobra.Command) {
	for _, c := range cmds {
		c.GroupID = group
		root.AddCommand(c)
	}
}

// rootHelp is what djinn --help says before the commands.
const rootHelp = `djinn runs a server of leases, remote events and the Jini services —
transactions, event mailbox, lease renewal, locks, lookup and discovery —
replicated through Raft, and talks to one.

  djinn serve                  a server on 127.0.0.1:4161, data in ./djinn-data
  djinn status                 what it serves, its leader and its counts
  djinn mailbox register       a leased registration; djinn ls leases lists them
  djinn txn create             a transaction; djinn txn commit ID commits it

The client commands reach --server (127.0.0.1:4161, or DJINN_SERVER), with
--tls-ca/--tls-cert/--tls-key for TLS. They print text, or -o json, -o yaml,
-o template='{{.field}}'. They exit 0 for yes, 1 for a negative answer or
an error, 2 for a command line not understood (djinn help exit-codes).
A service command waits up to --wait-timeout (30s, or DJINN_WAIT_TIMEOUT;
0: not at all) for a server still starting.`

// exitCodesTopic is `djinn help exit-codes`: a help topic, not a command.
func exitCodesTopic() *cobra.Command {
	return &cobra.Command{Use: "exit-codes", Short: "What djinn's exit statuses mean", Long: exitHelpText}
}

// strictTree makes every command of the tree refuse what it does not
// understand as a usage error — unknown flags, unknown subcommands, the
// wrong number of arguments, an unknown -o — and say when an old flag name
// was used.
func strictTree(root *cobra.Command, g *globals) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// A group's flags failed to parse after a word that is none of its
		// commands (djinn bogus -o json): the command is what is unknown,
		// and the flags may be its.
		if c.Annotations["group"] == "true" {
			args := c.Flags().Args()
			if len(args) == 0 && !c.HasParent() {
				args = commandWords(g.args) // djinn -o json bogus: the flag came first
				if len(args) == 0 {
					return noCommand(c, err) // djinn -o json
				}
			}
			if len(args) > 0 {
				return groupRun(c, args)
			}
		}
		return usageError{flagValueError(err)}
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && !c.Runnable() {
			c.Args, c.RunE = cobra.ArbitraryArgs, groupRun
			c.Annotations = map[string]string{"group": "true"}
		} else if c.RunE != nil {
			c.Args, c.RunE = usageArgs(c.Args), g.checked(c.RunE)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// noCommand is the error of a command line of flags alone (djinn -o
// json): they are a command's flags, and the command is missing. A flag
// that no command has is named too.
func noCommand(root *cobra.Command, err error) error {
	const next = `give a command and its flags after it, as in "djinn status -o json" (djinn help lists the commands)`
	var unknown *pflag.NotExistError
	if errors.As(err, &unknown) {
		name, short := unknown.GetSpecifiedName(), unknown.GetSpecifiedShortnames() != ""
		if !anyHasFlag(root, name, short) {
			flag := "--" + name
			if short {
				flag = "-" + name
			}
			return usageError{fmt.Errorf("no command given, and no command has the flag %s: %s", flag, next)}
		}
	}
	return usageError{fmt.Errorf("no command given: %s", next)}
}

// anyHasFlag reports whether c or a command under it has the flag name
// (with short, the shorthand name).
func anyHasFlag(c *cobra.Command, name string, short bool) bool {
	for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
		if !short && fs.Lookup(name) != nil || short && len(name) == 1 && fs.ShorthandLookup(name) != nil {
			return true
		}
	}
	for _, sub := range c.Commands() {
		if anyHasFlag(sub, name, short) {
			return true
		}
	}
	return false
}

// commandWords returns the words of a command line that are neither flags
// nor, as cobra reads a line to find its command, the value after a flag
// ("-o json", "--server ADDR").
func commandWords(args []string) []string {
	var words []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			return append(words, args[i+1:]...)
		case strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && (strings.HasPrefix(a, "--") || len(a) == 2):
			i++ // its value
		case strings.HasPrefix(a, "-"):
		default:
			words = append(words, a)
		}
	}
	return words
}

// strictHelp makes djinn help refuse a topic it does not have as a usage
// error, where cobra's prints the nearest command's help and exits 0.
func strictHelp(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	for _, help := range root.Commands() {
		if help.Name() != "help" || help.Run == nil {
			continue
		}
		show := help.Run
		help.Run = nil
		help.RunE = func(cmd *cobra.Command, args []string) error {
			if found, rest, err := root.Find(args); err != nil || found == nil || len(rest) > 0 {
				return usageError{fmt.Errorf("unknown help topic %q (djinn --help lists them)", strings.Join(args, " "))}
			}
			show(cmd, args)
			return nil
		}
	}
}

// flagWants says what a typed flag's value must be, by its type.
var flagWants = map[string]string{
	"int": "a whole number", "int32": "a whole number", "int64": "a whole number",
	"uint": "a whole number, 0 or more", "uint32": "a whole number, 0 or more", "uint64": "a whole number, 0 or more",
	"bool": "true or false", "duration": "a Go duration: 300ms, 5s, 2m",
}

// flagValueError says what a typed flag wants, in place of pflag's
// "invalid argument "x" for "--count" flag: strconv.ParseInt: parsing "x":
// invalid syntax"; other errors are returned as they are.
func flagValueError(err error) error {
	var bad *pflag.InvalidValueError
	if !errors.As(err, &bad) {
		return err
	}
	f := bad.GetFlag()
	want, ok := flagWants[f.Value.Type()]
	if !ok {
		return fmt.Errorf("--%s %q: %w", f.Name, bad.GetValue(), errors.Unwrap(bad))
	}
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("--%s %q: out of range: want %s", f.Name, bad.GetValue(), want)
	}
	return fmt.Errorf("--%s %q: want %s", f.Name, bad.GetValue(), want)
}

// usageArgs makes an argument check's errors usage errors that say the
// command's usage line, which names the arguments it takes.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	if check == nil {
		return nil
	}
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{fmt.Errorf("%w; usage: %s", err, strings.TrimSuffix(cmd.UseLine(), " [flags]"))}
		}
		return nil
	}
}

// checked runs a command after checking -o and telling of old flag names.
func (g *globals) checked(run func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := g.checkOutput(); err != nil {
			return err
		}
		if err := g.checkWaitTimeout(); err != nil {
			return err
		}
		for _, n := range oldNamesUsed(cmd) {
			g.notice(cmd.ErrOrStderr(), map[string]any{}, n)
		}
		return run(cmd, args)
	}
}

// groupRun is what a command group does by itself: it shows its help, or
// refuses a subcommand it does not have.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return usageError{fmt.Errorf("%s (%s --help lists them)", msg, cmd.CommandPath())}
}
