package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/korvet/korvet/engine/auth"
)

// korvet users ...: SCRAM users through /api/v1/users, on a running korvet
// (korvet user ... writes them to Redis directly).

func userPath(name string) string { return "/api/v1/users/" + url.PathEscape(name) }

func usersNoun() cliNoun {
	mech := map[string]flagKind{"mechanism": flagString}
	return cliNoun{name: "users", summary: "list, set and delete the SCRAM users of a running korvet (super users only)", verbs: []cliVerb{
		{name: "list", synopsis: "", help: "Lists the users and their SCRAM mechanisms.", run: usersList},
		{name: "set", synopsis: "NAME [--mechanism SCRAM-SHA-256|SCRAM-SHA-512|all] [--iterations N]",
			help: "Creates the user or changes its password (mechanism default: all). The password\n" +
				"comes from KORVET_NEW_PASSWORD, else KORVET_PASSWORD when not logging in with --user,\n" +
				"else it is asked twice on the terminal or read as the first line of stdin: never\n" +
				"from the command line, where ps shows it.",
			flags: map[string]flagKind{"mechanism": flagString, "iterations": flagString}, run: usersSet},
		{name: "delete", synopsis: "NAME [--mechanism SCRAM-SHA-256|SCRAM-SHA-512]",
			help: "Deletes the user's credentials (of every mechanism unless --mechanism).", flags: mech, run: usersDelete},
	}}
}

// mechanismsOf parses --mechanism; "" when all are meant.
func mechanismsOf(a cliArgs, def string) ([]string, error) {
	m := a.str("mechanism")
	if m == "" {
		m = def
	}
	if strings.EqualFold(m, "all") {
		var all []string
		for _, m := range auth.Mechanisms {
			all = append(all, m.String())
		}
		return all, nil
	}
	if m == "" {
		return nil, nil
	}
	pm, ok := auth.ParseMechanism(m)
	if !ok {
		return nil, usagef("--mechanism %q: use SCRAM-SHA-256, SCRAM-SHA-512 or all", m)
	}
	return []string{pm.String()}, nil
}

func usersList(x *cliRun) error {
	if err := x.args.noPositional(); err != nil {
		return err
	}
	var out struct {
		Users []struct {
			Name       string `json:"name"`
			Mechanisms []struct {
				Mechanism  string `json:"mechanism"`
				Iterations int    `json:"iterations"`
			} `json:"mechanisms"`
		} `json:"users"`
	}
	if printed, err := x.request(http.MethodGet, "/api/v1/users", nil, nil, &out); printed || err != nil {
		return err
	}
	tw := x.table("NAME", "MECHANISMS")
	for _, u := range out.Users {
		var ms []string
		for _, m := range u.Mechanisms {
			ms = append(ms, fmt.Sprintf("%s (%d iterations)", m.Mechanism, m.Iterations))
		}
		fmt.Fprintf(tw, "%s\t%s\n", u.Name, strings.Join(ms, ", "))
	}
	return tw.Flush()
}

func usersSet(x *cliRun) error {
	name, err := x.args.onePositional("user name")
	if err != nil {
		return err
	}
	if err := auth.ValidUserName(name); err != nil {
		return usagef("%v", err)
	}
	mechs, err := mechanismsOf(x.args, "all")
	if err != nil {
		return err
	}
	var iterations int64
	if x.args.has("iterations") {
		iterations, err = x.args.int("iterations", 0)
		if err != nil || iterations < auth.MinIterations || iterations > auth.MaxIterations {
			return usagef("--iterations %q: use %d to %d", x.args.str("iterations"), auth.MinIterations, auth.MaxIterations)
		}
	}
	pw := x.env.getenv("KORVET_NEW_PASSWORD")
	if pw == "" && x.args.str("user") == "" {
		pw = x.env.getenv("KORVET_PASSWORD")
	}
	if pw == "" {
		if pw, err = readPassword(x.env.stdin, x.env.stderr, name); err != nil {
			return usagef("password of %s: %v", name, err)
		}
	}
	c, err := x.conn()
	if err != nil {
		return err
	}
	var raws [][]byte
	for _, m := range mechs {
		body := map[string]any{"mechanism": m, "password": pw}
		if iterations > 0 {
			body["iterations"] = iterations
		}
		raw, err := c.call(x.ctx, http.MethodPut, userPath(name), nil, body, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		raws = append(raws, raw)
		if c.output != "json" {
			x.printf("user %s: %s credential set\n", name, m)
		}
	}
	if c.output == "json" {
		return x.printJSON(jsonArray(raws))
	}
	return nil
}

// jsonArray makes one document of one or more answers.
func jsonArray(raws [][]byte) []byte {
	if len(raws) == 1 && len(strings.TrimSpace(string(raws[0]))) > 0 {
		return raws[0]
	}
	var b strings.Builder
	b.WriteString("[")
	for i, r := range raws {
		if i > 0 {
			b.WriteString(",")
		}
		if s := strings.TrimSpace(string(r)); s != "" {
			b.WriteString(s)
		} else {
			b.WriteString("{}")
		}
	}
	b.WriteString("]")
	return []byte(b.String())
}

func usersDelete(x *cliRun) error {
	name, err := x.args.onePositional("user name")
	if err != nil {
		return err
	}
	mechs, err := mechanismsOf(x.args, "")
	if err != nil {
		return err
	}
	var q url.Values
	if len(mechs) == 1 {
		q = url.Values{"mechanism": {mechs[0]}}
	}
	if printed, err := x.request(http.MethodDelete, userPath(name), q, nil, nil); printed || err != nil {
		return err
	}
	what := "all credentials"
	if len(mechs) == 1 {
		what = "its " + mechs[0] + " credential"
	}
	x.printf("user %s: %s deleted\n", name, what)
	return nil
}
