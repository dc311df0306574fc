package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
)

// korvet topics|groups|acls|users VERB ...: the admin commands. Each verb
// is one (or a few) calls of the admin API; this file dispatches them and
// prints their help; cli_<noun>.go hold the verbs.

// cliVerb is one admin command.
type cliVerb struct {
	name     string
	synopsis string // after "korvet NOUN VERB"
	help     string
	flags    map[string]flagKind
	outputs  []string // --output values besides table and json
	// names is what the positional argument names, for completion:
	// "topics", "groups" or "" (none or free text).
	names string
	run   func(x *cliRun) error
}

// cliNoun is a group of verbs (topics, groups, ...).
type cliNoun struct {
	name, summary string
	verbs         []cliVerb
}

// cliRun is one invocation: its arguments, output and a connection made
// on first use (after the arguments are checked: a usage error costs no
// password prompt).
type cliRun struct {
	ctx  context.Context
	args cliArgs
	env  cliEnv
	verb *cliVerb
	cn   *adminConn
}

func (x *cliRun) conn() (*adminConn, error) {
	if x.cn == nil {
		c, err := connect(x.args, x.env, x.verb.outputs...)
		if err != nil {
			return nil, err
		}
		x.cn = c
	}
	return x.cn, nil
}

// output is the --output value, checked.
func (x *cliRun) output() string {
	if o := x.args.str("output"); o != "" {
		return o
	}
	return "table"
}

// printJSON writes an API answer as one indented JSON document.
func (x *cliRun) printJSON(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return fmt.Errorf("korvet answered invalid JSON: %w", err)
	}
	b.WriteByte('\n')
	_, err := x.env.stdout.Write(b.Bytes())
	return err
}

// table starts aligned columns on stdout; flush it when done.
func (x *cliRun) table(header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(x.env.stdout, 2, 8, 2, ' ', 0)
	if len(header) > 0 {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	return tw
}

func (x *cliRun) printf(format string, args ...any) { fmt.Fprintf(x.env.stdout, format, args...) }

// cliNouns lists the admin commands (the completion scripts are built
// from it too).
func cliNouns() []cliNoun {
	return []cliNoun{topicsNoun(), groupsNoun(), aclsNoun(), usersNoun()}
}

func findNoun(name string) *cliNoun {
	for _, n := range cliNouns() {
		if n.name == name {
			return &n
		}
	}
	return nil
}

const commonHelp = `Common flags:
  --config FILE     korvet.toml of the korvet to reach (default /etc/korvet/korvet.toml
                    when present): its admin socket in data_dir, else [http] listen
  --url URL         reach korvet at http(s)://host:port instead
  --user NAME       log in as this korvet user (password from KORVET_PASSWORD,
                    else asked on the terminal)
  --token T         the [http] admin_token (or KORVET_ADMIN_TOKEN)
  --output FORMAT   table (default) or json (the API's answer, one document)

Exit codes: 0 ok, 1 korvet refused or failed (its message on stderr), 2 usage
error, 3 not found, 4 not authorized, 5 cannot reach korvet.
`

// nounHelp is `korvet NOUN --help`.
func nounHelp(n *cliNoun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "korvet %s: %s\n\nusage:\n", n.name, n.summary)
	for _, v := range n.verbs {
		fmt.Fprintf(&b, "  korvet %s %s %s\n", n.name, v.name, v.synopsis)
	}
	b.WriteString("\n")
	for _, v := range n.verbs {
		fmt.Fprintf(&b, "%s:\n%s\n", v.name, indent(v.help))
	}
	b.WriteString(commonHelp)
	return b.String()
}

func verbHelp(n *cliNoun, v *cliVerb) string {
	return fmt.Sprintf("usage: korvet %s %s %s\n\n%s\n\n%s", n.name, v.name, v.synopsis, v.help, commonHelp)
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// runAdmin runs `korvet NOUN VERB ...` and returns its exit code.
func runAdmin(noun string, args []string, env cliEnv) int {
	n := findNoun(noun)
	if len(args) == 0 {
		fmt.Fprint(env.stderr, nounHelp(n))
		return exitUsage
	}
	if a := args[0]; a == "help" || a == "-h" || a == "--help" {
		fmt.Fprint(env.stdout, nounHelp(n))
		return exitOK
	}
	var v *cliVerb
	for i := range n.verbs {
		if n.verbs[i].name == args[0] {
			v = &n.verbs[i]
		}
	}
	if v == nil {
		fmt.Fprintf(env.stderr, "korvet %s: unknown command %q (korvet %s --help lists them)\n", noun, args[0], noun)
		return exitUsage
	}
	a, err := parseArgs(args[1:], v.flags)
	if err == errHelp {
		fmt.Fprint(env.stdout, verbHelp(n, v))
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "korvet %s %s: %v\nusage: korvet %s %s %s (--help for more)\n", noun, v.name, err, noun, v.name, v.synopsis)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	x := &cliRun{ctx: ctx, args: a, env: env, verb: v}
	if err := v.run(x); err != nil {
		code := exitCode(err)
		fmt.Fprintf(env.stderr, "korvet %s %s: %v\n", noun, v.name, err)
		if code == exitUsage {
			fmt.Fprintf(env.stderr, "usage: korvet %s %s %s (--help for more)\n", noun, v.name, v.synopsis)
		}
		return code
	}
	return exitOK
}
