package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// korvet topics ...: topics through /api/v1/topics.

// request sends one admin call; with --output json it prints the answer
// and reports printed, else it decodes it into out for a table.
func (x *cliRun) request(method, path string, q url.Values, body, out any) (printed bool, err error) {
	c, err := x.conn()
	if err != nil {
		return false, err
	}
	raw, err := c.call(x.ctx, method, path, q, body, out)
	if err != nil {
		return false, err
	}
	if c.output == "json" {
		return true, x.printJSON(raw)
	}
	return false, nil
}

func topicPath(name string, rest ...string) string {
	return "/api/v1/topics/" + url.PathEscape(name) + strings.Join(rest, "")
}

type apiConfig struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Source    string `json:"source"`
	Sensitive bool   `json:"sensitive"`
	ReadOnly  bool   `json:"read_only"`
}

func (x *cliRun) printConfigs(cs []apiConfig) error {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	tw := x.table("CONFIG", "VALUE", "SOURCE")
	for _, c := range cs {
		v := c.Value
		if c.Sensitive {
			v = "(sensitive)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, v, c.Source)
	}
	return tw.Flush()
}

func topicsNoun() cliNoun {
	return cliNoun{name: "topics", summary: "list, create, alter and delete topics of a running korvet", verbs: []cliVerb{
		{name: "list", synopsis: "[--output table|json|names]",
			help:    "Lists the topics you may describe. --output names prints one name a line.",
			outputs: []string{"names"}, run: topicsList},
		{name: "describe", names: "topics", synopsis: "NAME", help: "Shows a topic's partitions (offsets, leader) and configs.", run: topicsDescribe},
		{name: "create", synopsis: "NAME [--partitions N] [--topic-config k=v ...]",
			help:  "Creates a topic; --partitions defaults to the broker's num.partitions.\n--replication-factor is accepted and ignored (Redis keeps the copies).",
			flags: map[string]flagKind{"partitions": flagString, "replication-factor": flagString, "topic-config": flagList}, run: topicsCreate},
		{name: "delete", names: "topics", synopsis: "NAME", help: "Deletes a topic and its records.", run: topicsDelete},
		{name: "alter", names: "topics", synopsis: "NAME [--set k=v ...] [--delete k ...] [--dry-run]",
			help:  "Sets or removes topic configs (removed ones fall back to the broker's).\n--dry-run validates without changing anything.",
			flags: map[string]flagKind{"set": flagList, "delete": flagList, "dry-run": flagBool}, run: topicsAlter},
		{name: "add-partitions", names: "topics", synopsis: "NAME --count N", help: "Grows the topic to N partitions in all (partitions are never removed).",
			flags: map[string]flagKind{"count": flagString}, run: topicsAddPartitions},
		{name: "delete-records", names: "topics", synopsis: "NAME --partition P --before OFFSET",
			help:  "Deletes the records of partition P before OFFSET (-1: all of them).",
			flags: map[string]flagKind{"partition": flagString, "before": flagString}, run: topicsDeleteRecords},
		{name: "produce", names: "topics", synopsis: "NAME --value V [--key K] [--partition P] [--header k=v ...]",
			help:  "Produces one record (acks=all); the partition is chosen by key when not given.",
			flags: map[string]flagKind{"value": flagString, "key": flagString, "partition": flagString, "header": flagList}, run: topicsProduce},
		{name: "tail", names: "topics", synopsis: "NAME [--limit N] [--partition P]",
			help:  "Shows the last N records (default 20, at most 100); values are cut at 4 KiB.",
			flags: map[string]flagKind{"limit": flagString, "partition": flagString}, run: topicsTail},
	}}
}

func topicsList(x *cliRun) error {
	if err := x.args.noPositional(); err != nil {
		return err
	}
	var ts []struct {
		Name       string `json:"name"`
		Records    int64  `json:"records"`
		Bytes      int64  `json:"bytes"`
		Partitions []struct {
			Partition int32 `json:"partition"`
		} `json:"partitions"`
	}
	if printed, err := x.request(http.MethodGet, "/api/v1/topics", nil, nil, &ts); printed || err != nil {
		return err
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	if x.output() == "names" {
		for _, t := range ts {
			x.printf("%s\n", t.Name)
		}
		return nil
	}
	tw := x.table("NAME", "PARTITIONS", "RECORDS", "BYTES")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", t.Name, len(t.Partitions), t.Records, t.Bytes)
	}
	return tw.Flush()
}

func topicsDescribe(x *cliRun) error {
	name, err := x.args.onePositional("topic name")
	if err != nil {
		return err
	}
	var t struct {
		Name       string `json:"name"`
		ID         string `json:"id"`
		Internal   bool   `json:"internal"`
		Partitions []struct {
			Partition   int32 `json:"partition"`
			Leader      int32 `json:"leader"`
			LeaderEpoch int32 `json:"leader_epoch"`
			Start       int64 `json:"start_offset"`
			End         int64 `json:"end_offset"`
			Records     int64 `json:"records"`
		} `json:"partitions"`
		Configs []apiConfig `json:"configs"`
	}
	if printed, err := x.request(http.MethodGet, topicPath(name), nil, nil, &t); printed || err != nil {
		return err
	}
	x.printf("topic %s  id %s  %d partitions\n\n", t.Name, t.ID, len(t.Partitions))
	tw := x.table("PARTITION", "LEADER", "EPOCH", "START", "END", "RECORDS")
	for _, p := range t.Partitions {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\n", p.Partition, p.Leader, p.LeaderEpoch, p.Start, p.End, p.Records)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	x.printf("\n")
	return x.printConfigs(t.Configs)
}

func topicsCreate(x *cliRun) error {
	name, err := x.args.onePositional("topic name")
	if err != nil {
		return err
	}
	body := map[string]any{"name": name}
	if x.args.has("partitions") {
		n, err := x.args.int("partitions", 0)
		if err != nil || n < 1 || n > 1<<20 {
			return usagef("--partitions %q: want a count of 1 or more", x.args.str("partitions"))
		}
		body["partitions"] = n
	}
	if _, err := x.args.int("replication-factor", 1); err != nil {
		return usageError{err.Error()}
	}
	cfgs, err := x.args.keyValues("topic-config")
	if err != nil {
		return usageError{err.Error()}
	}
	if len(cfgs) > 0 {
		body["configs"] = cfgs
	}
	var out struct {
		Name       string `json:"name"`
		Partitions int32  `json:"partitions"`
	}
	if printed, err := x.request(http.MethodPost, "/api/v1/topics", nil, body, &out); printed || err != nil {
		return err
	}
	x.printf("created topic %s with %d partitions\n", name, out.Partitions)
	return nil
}

func topicsDelete(x *cliRun) error {
	name, err := x.args.onePositional("topic name")
	if err != nil {
		return err
	}
	if printed, err := x.request(http.MethodDelete, topicPath(name), nil, nil, nil); printed || err != nil {
		return err
	}
	x.printf("deleted topic %s\n", name)
	return nil
}

func topicsAlter(x *cliRun) error {
	name, err := x.args.onePositional("topic name")
	if err != nil {
		return err
	}
	set, err := x.args.keyValues("set")
	if err != nil {
		return usageError{err.Error()}
	}
	del := x.args.lists["delete"]
	if len(set) == 0 && len(del) == 0 {
		return usagef("nothing to alter: give --set k=v or --delete k")
	}
	for _, k := range del {
		if _, both := set[k]; both {
			return usagef("config %s both set and deleted", k)
		}
	}
	var q url.Values
	if x.args.flag("dry-run") {
		q = url.Values{"validate_only": {"true"}}
	}
	var out struct {
		Configs []apiConfig `json:"configs"`
	}
	body := map[string]any{"set": set, "delete": append([]string{}, del...)}
	if printed, err := x.request(http.MethodPatch, topicPath(name, "/configs"), q, body, &out); printed || err != nil {
		return err
	}
	if x.args.flag("dry-run") {
		x.printf("dry run: the change is valid, nothing was changed\n")
		return nil
	}
	// The configs set on the topic: the defaults are in describe.
	var own []apiConfig
	for _, c := range out.Configs {
		if !strings.Contains(c.Source, "default") && !strings.Contains(c.Source, "broker") {
			own = append(own, c)
		}
	}
	x.printf("altered topic %s; its own configs now:\n\n", name)
	return x.printConfigs(own)
}

func topicsAddPartitions(x *cliRun) error {
	name, err := x.args.onePositional("topic name")
	if err != nil {
		return err
	}
	n, err := x.args.int("count", 0)
	if err != nil || n < 1 || n > 1<<20 {
		return usagef("--count: want the new total number of partitions (1 or more)")
	}
	var out struct {
		Partitions int32 `json:"partitions"`
	}
	if printed, err := x.request(http.MethodPost, topicPath(name, "/partitions"), nil, map[string]any{"count": n}, &out); printed || err != nil {
		return err
	}
	x.printf("topic %s now has %d partitions\n", name, out.Partitions)
	return nil
}

func topicsDeleteRecords(x *cliRun) error {
	name, err := x.args.onePositional("topic name")
	if err != nil {
		return err
	}
	if !x.args.has("partition") || !x.args.has("before") {
		return usagef("give --partition P and --before OFFSET")
	}
	p, err := x.args.int("partition", 0)
	if err != nil || p < 0 || p > 1<<31-1 {
		return usagef("--partition %q: want a partition number", x.args.str("partition"))
	}
	before, err := x.args.int("before", 0)
	if err != nil || before < -1 {
		return usagef("--before %q: want an offset, or -1 for the high watermark", x.args.str("before"))
	}
	body := map[string]any{"partitions": []map[string]int64{{"partition": p, "before": before}}}
	var out struct {
		Partitions []struct {
			Partition    int32 `json:"partition"`
			LowWatermark int64 `json:"low_watermark"`
		} `json:"partitions"`
	}
	if printed, err := x.request(http.MethodPost, topicPath(name, "/delete-records"), nil, body, &out); printed || err != nil {
		return err
	}
	for _, p := range out.Partitions {
		x.printf("topic %s partition %d: records now start at offset %d\n", name, p.Partition, p.LowWatermark)
	}
	return nil
}

func topicsProduce(x *cliRun) error {
	name, err := x.args.onePositional("topic name")
	if err != nil {
		return err
	}
	if !x.args.has("value") {
		return usagef("give --value V")
	}
	part, err := x.args.int("partition", -1)
	if err != nil || part < -1 || part > 1<<31-1 {
		return usagef("--partition %q: want a partition number", x.args.str("partition"))
	}
	body := map[string]any{"partition": part, "value": x.args.str("value"), "encoding": "text"}
	if x.args.has("key") {
		body["key"] = x.args.str("key")
	}
	var hs []map[string]string
	for _, h := range x.args.lists["header"] {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return usagef("--header %q: want key=value", h)
		}
		hs = append(hs, map[string]string{"key": k, "value": v})
	}
	if len(hs) > 0 {
		body["headers"] = hs
	}
	var out struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"offset"`
	}
	if printed, err := x.request(http.MethodPost, topicPath(name, "/records"), nil, body, &out); printed || err != nil {
		return err
	}
	x.printf("produced to %s partition %d at offset %d\n", name, out.Partition, out.Offset)
	return nil
}

// apiBytes is a key, header value or record value as the API shows it.
type apiBytes struct {
	Text      *string         `json:"text"`
	JSON      json.RawMessage `json:"json"` // raw: big numbers stay exact
	Base64    *string         `json:"base64"`
	Null      bool            `json:"null"` // a tombstone's value
	Size      int             `json:"size"`
	Truncated bool            `json:"truncated"`
}

func (b *apiBytes) String() string {
	if b == nil {
		return "(null)"
	}
	var s string
	switch {
	case b.Null:
		return "(null)"
	case b.Text != nil:
		s = strconv.Quote(*b.Text)
		s = s[1 : len(s)-1] // control characters escaped, no quotes
	case len(b.JSON) > 0:
		var c bytes.Buffer
		if json.Compact(&c, b.JSON) != nil {
			return string(b.JSON)
		}
		s = c.String()
	case b.Base64 != nil:
		raw, err := base64.StdEncoding.DecodeString(*b.Base64)
		if err != nil {
			s = "base64:" + *b.Base64
		} else {
			s = fmt.Sprintf("hex:%x", raw)
		}
	default:
		return "(null)"
	}
	if b.Truncated {
		s += fmt.Sprintf("... (%d bytes)", b.Size)
	}
	return s
}

func topicsTail(x *cliRun) error {
	name, err := x.args.onePositional("topic name")
	if err != nil {
		return err
	}
	q := url.Values{}
	if x.args.has("limit") {
		n, err := x.args.int("limit", 20)
		if err != nil || n < 1 || n > 100 {
			return usagef("--limit %q: want 1 to 100", x.args.str("limit"))
		}
		q.Set("limit", strconv.FormatInt(n, 10))
	}
	if x.args.has("partition") {
		p, err := x.args.int("partition", 0)
		if err != nil || p < 0 || p > 1<<31-1 {
			return usagef("--partition %q: want a partition number", x.args.str("partition"))
		}
		q.Set("partition", strconv.FormatInt(p, 10))
	}
	var out struct {
		Records []struct {
			Partition int32     `json:"partition"`
			Offset    int64     `json:"offset"`
			Timestamp int64     `json:"timestamp"`
			Key       *apiBytes `json:"key"`
			Headers   []struct {
				Key   string    `json:"key"`
				Value *apiBytes `json:"value"`
			} `json:"headers"`
			Value *apiBytes `json:"value"`
		} `json:"records"`
	}
	if printed, err := x.request(http.MethodGet, topicPath(name, "/records"), q, nil, &out); printed || err != nil {
		return err
	}
	tw := x.table("PARTITION", "OFFSET", "TIME", "KEY", "HEADERS", "VALUE")
	for _, r := range out.Records {
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+h.Value.String())
		}
		ts := time.UnixMilli(r.Timestamp).UTC().Format("2006-01-02T15:04:05.000Z")
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", r.Partition, r.Offset, ts, r.Key.String(), strings.Join(hs, ","), r.Value.String())
	}
	return tw.Flush()
}
