package main

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// korvet groups ...: consumer groups through /api/v1/groups.

func groupPath(name string, rest ...string) string {
	return "/api/v1/groups/" + url.PathEscape(name) + strings.Join(rest, "")
}

func groupsNoun() cliNoun {
	return cliNoun{name: "groups", summary: "list, describe, reset and delete consumer groups of a running korvet", verbs: []cliVerb{
		{name: "list", synopsis: "[--output table|json|names]", help: "Lists the groups you may describe, with their state and total lag.\n--output names prints one name a line.",
			outputs: []string{"names"}, run: groupsList},
		{name: "describe", names: "groups", synopsis: "GROUP", help: "Shows a group's members, committed offsets and lag.", run: groupsDescribe},
		{name: "delete", names: "groups", synopsis: "GROUP", help: "Deletes a group's committed offsets; refused while it has members.", run: groupsDelete},
		{name: "reset-offsets", names: "groups", synopsis: "GROUP --topic T --to earliest|latest|timestamp:MS|offset:N [--partitions 0,1] [--dry-run]",
			help: "Commits new offsets for the group on topic T (all its partitions unless\n" +
				"--partitions). timestamp:MS is the first offset at or after that time (ms since\n" +
				"the epoch, or RFC 3339). Refused while the group has members: stop its consumers\n" +
				"first. --dry-run shows the offsets without committing them.",
			flags: map[string]flagKind{"topic": flagString, "to": flagString, "partitions": flagString, "dry-run": flagBool}, run: groupsReset},
	}}
}

func groupsList(x *cliRun) error {
	if err := x.args.noPositional(); err != nil {
		return err
	}
	var gs []struct {
		Group   string `json:"group"`
		Type    string `json:"type"`
		State   string `json:"state"`
		Members int    `json:"members"`
		Lag     int64  `json:"lag"`
	}
	if printed, err := x.request(http.MethodGet, "/api/v1/groups", nil, nil, &gs); printed || err != nil {
		return err
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].Group < gs[j].Group })
	if x.output() == "names" {
		for _, g := range gs {
			x.printf("%s\n", g.Group)
		}
		return nil
	}
	tw := x.table("GROUP", "TYPE", "STATE", "MEMBERS", "LAG")
	for _, g := range gs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", g.Group, g.Type, g.State, g.Members, g.Lag)
	}
	return tw.Flush()
}

func groupsDescribe(x *cliRun) error {
	name, err := x.args.onePositional("group name")
	if err != nil {
		return err
	}
	var g struct {
		Group    string `json:"group"`
		Type     string `json:"type"`
		State    string `json:"state"`
		Protocol string `json:"protocol"`
		Members  []struct {
			MemberID    string `json:"member_id"`
			ClientID    string `json:"client_id"`
			Host        string `json:"host"`
			Assignments []struct {
				Topic      string  `json:"topic"`
				Partitions []int32 `json:"partitions"`
			} `json:"assignments"`
		} `json:"members"`
		Offsets []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Committed int64  `json:"committed"`
			End       int64  `json:"end_offset"`
			Lag       int64  `json:"lag"`
		} `json:"offsets"`
	}
	if printed, err := x.request(http.MethodGet, groupPath(name), nil, nil, &g); printed || err != nil {
		return err
	}
	x.printf("group %s  type %s  state %s  protocol %s  %d members\n\n", g.Group, g.Type, g.State, g.Protocol, len(g.Members))
	if len(g.Members) > 0 {
		tw := x.table("MEMBER", "CLIENT", "HOST", "ASSIGNMENT")
		for _, m := range g.Members {
			var as []string
			for _, a := range m.Assignments {
				as = append(as, fmt.Sprintf("%s%v", a.Topic, a.Partitions))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.MemberID, m.ClientID, m.Host, strings.Join(as, " "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		x.printf("\n")
	}
	tw := x.table("TOPIC", "PARTITION", "COMMITTED", "END", "LAG")
	for _, o := range g.Offsets {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", o.Topic, o.Partition, o.Committed, o.End, o.Lag)
	}
	return tw.Flush()
}

func groupsDelete(x *cliRun) error {
	name, err := x.args.onePositional("group name")
	if err != nil {
		return err
	}
	if printed, err := x.request(http.MethodDelete, groupPath(name), nil, nil, nil); printed || err != nil {
		return err
	}
	x.printf("deleted group %s\n", name)
	return nil
}

// resetTarget parses --to into the API's fields.
func resetTarget(to string) (map[string]any, error) {
	kind, arg, _ := strings.Cut(to, ":")
	switch kind {
	case "earliest", "latest":
		if arg != "" {
			break
		}
		return map[string]any{"to": kind}, nil
	case "timestamp":
		if ms, err := strconv.ParseInt(arg, 10, 64); err == nil && ms >= 0 {
			return map[string]any{"to": kind, "timestamp": ms}, nil
		}
		if t, err := time.Parse(time.RFC3339Nano, arg); err == nil {
			return map[string]any{"to": kind, "timestamp": t.UnixMilli()}, nil
		}
		return nil, usagef("--to %s: want timestamp:MS (ms since the epoch) or timestamp:2006-01-02T15:04:05Z", to)
	case "offset":
		if n, err := strconv.ParseInt(arg, 10, 64); err == nil && n >= 0 {
			return map[string]any{"to": kind, "offset": n}, nil
		}
		return nil, usagef("--to %s: want offset:N with N 0 or more", to)
	}
	return nil, usagef("--to %q: want earliest, latest, timestamp:MS or offset:N", to)
}

// parsePartitions parses --partitions 0,1,2.
func parsePartitions(s string) ([]int32, error) {
	var ps []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n < 0 {
			return nil, usagef("--partitions %q: want partition numbers separated by commas", s)
		}
		ps = append(ps, int32(n))
	}
	return ps, nil
}

func groupsReset(x *cliRun) error {
	name, err := x.args.onePositional("group name")
	if err != nil {
		return err
	}
	if x.args.str("topic") == "" || x.args.str("to") == "" {
		return usagef("give --topic T and --to earliest|latest|timestamp:MS|offset:N")
	}
	body, err := resetTarget(x.args.str("to"))
	if err != nil {
		return err
	}
	body["topic"] = x.args.str("topic")
	body["dry_run"] = x.args.flag("dry-run")
	if x.args.has("partitions") {
		ps, err := parsePartitions(x.args.str("partitions"))
		if err != nil {
			return err
		}
		body["partitions"] = ps
	}
	var out struct {
		Offsets []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
		} `json:"offsets"`
		DryRun bool `json:"dry_run"`
	}
	if printed, err := x.request(http.MethodPost, groupPath(name, "/reset-offsets"), nil, body, &out); printed || err != nil {
		return err
	}
	if out.DryRun {
		x.printf("dry run: these offsets were not committed\n")
	}
	tw := x.table("TOPIC", "PARTITION", "NEW-OFFSET")
	for _, o := range out.Offsets {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", o.Topic, o.Partition, o.Offset)
	}
	return tw.Flush()
}
