package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// korvet acls ...: ACL bindings through /api/v1/acls.

var aclFlags = map[string]flagKind{
	"principal": flagString, "operation": flagString, "host": flagString,
	"topic": flagString, "group": flagString, "transactional-id": flagString, "cluster": flagBool,
	"prefixed": flagBool, "pattern": flagString, "deny": flagBool, "allow": flagBool, "all": flagBool,
}

// apiACL is a binding, or a filter (empty fields match any: left out).
type apiACL struct {
	ResourceType string `json:"resource_type,omitempty"`
	ResourceName string `json:"resource_name,omitempty"`
	Pattern      string `json:"pattern,omitempty"`
	Principal    string `json:"principal,omitempty"`
	Host         string `json:"host,omitempty"`
	Operation    string `json:"operation,omitempty"`
	Permission   string `json:"permission,omitempty"`
}

func aclsNoun() cliNoun {
	resources := "--topic T | --group G | --transactional-id ID | --cluster"
	return cliNoun{name: "acls", summary: "list, create and delete ACLs of a running korvet (as kafka-acls.sh)", verbs: []cliVerb{
		{name: "list", synopsis: "[--principal P] [--operation OP] [" + resources + "] [--prefixed|--pattern any|match|literal|prefixed] [--allow|--deny] [--host H]",
			help:  "Lists the ACLs matching the filters (all of them without filters).",
			flags: aclFlags, run: aclsList},
		{name: "create", synopsis: "--principal User:NAME --operation OP " + resources + " [--prefixed] [--deny] [--host H]",
			help: "Allows (or with --deny denies) OP on the resource to the principal, from any host\n" +
				"unless --host. OP is read, write, create, delete, alter, describe, describe_configs,\n" +
				"alter_configs, cluster_action, idempotent_write or all. --prefixed matches every\n" +
				"resource whose name starts with the given name.",
			flags: aclFlags, run: aclsCreate},
		{name: "delete", synopsis: "[filters as for list] | --all",
			help:  "Deletes the ACLs matching the filters; --all is needed to delete every ACL.",
			flags: aclFlags, run: aclsDelete},
	}}
}

// aclBinding reads the resource, principal and permission flags; for a
// filter, what is not given stays empty (matches any).
func aclBinding(a cliArgs, filter bool) (apiACL, error) {
	var b apiACL
	n := 0
	for _, r := range []struct{ flag, typ string }{{"topic", "topic"}, {"group", "group"}, {"transactional-id", "transactional_id"}} {
		if a.has(r.flag) {
			b.ResourceType, b.ResourceName = r.typ, a.str(r.flag)
			n++
		}
	}
	if a.flag("cluster") {
		b.ResourceType, b.ResourceName = "cluster", "kafka-cluster"
		n++
	}
	if n > 1 {
		return b, usagef("give one of --topic, --group, --transactional-id, --cluster")
	}
	if a.flag("allow") && a.flag("deny") {
		return b, usagef("--allow and --deny exclude each other")
	}
	if a.flag("prefixed") && a.has("pattern") {
		return b, usagef("--prefixed and --pattern exclude each other")
	}
	b.Principal, b.Host, b.Operation = a.str("principal"), a.str("host"), strings.ToLower(a.str("operation"))
	b.Pattern = strings.ToLower(a.str("pattern"))
	if a.flag("prefixed") {
		b.Pattern = "prefixed"
	}
	switch {
	case a.flag("deny"):
		b.Permission = "deny"
	case a.flag("allow"):
		b.Permission = "allow"
	}
	if filter {
		return b, nil
	}
	if a.flag("all") {
		return b, usagef("--all is for delete")
	}
	switch {
	case n == 0:
		return b, usagef("give the resource: one of --topic, --group, --transactional-id, --cluster")
	case b.Principal == "":
		return b, usagef("give --principal User:NAME")
	case b.Operation == "":
		return b, usagef("give --operation OP")
	case b.Pattern == "any" || b.Pattern == "match":
		return b, usagef("--pattern %s is for filters: an ACL is literal or prefixed", b.Pattern)
	}
	if b.Pattern == "" {
		b.Pattern = "literal"
	}
	if b.Host == "" {
		b.Host = "*"
	}
	if b.Permission == "" {
		b.Permission = "allow"
	}
	return b, nil
}

// query is the filter as URL parameters, the empty ones left out.
func (b apiACL) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"resource_type": b.ResourceType, "resource_name": b.ResourceName, "pattern": b.Pattern,
		"principal": b.Principal, "host": b.Host, "operation": b.Operation, "permission": b.Permission} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func (x *cliRun) printACLs(acls []apiACL) error {
	tw := x.table("PRINCIPAL", "HOST", "OPERATION", "PERMISSION", "RESOURCE", "PATTERN", "NAME")
	for _, b := range acls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Principal, b.Host, b.Operation, b.Permission, b.ResourceType, b.Pattern, b.ResourceName)
	}
	return tw.Flush()
}

func aclsList(x *cliRun) error {
	if err := x.args.noPositional(); err != nil {
		return err
	}
	if x.args.flag("all") {
		return usagef("--all is for delete (list without filters lists all)")
	}
	f, err := aclBinding(x.args, true)
	if err != nil {
		return err
	}
	var out struct {
		ACLs []apiACL `json:"acls"`
	}
	if printed, err := x.request(http.MethodGet, "/api/v1/acls", f.query(), nil, &out); printed || err != nil {
		return err
	}
	return x.printACLs(out.ACLs)
}

func aclsCreate(x *cliRun) error {
	if err := x.args.noPositional(); err != nil {
		return err
	}
	b, err := aclBinding(x.args, false)
	if err != nil {
		return err
	}
	if printed, err := x.request(http.MethodPost, "/api/v1/acls", nil, b, nil); printed || err != nil {
		return err
	}
	x.printf("created ACL: %s %s %s on %s %s %q from %s\n", b.Principal, b.Permission, b.Operation, b.Pattern, b.ResourceType, b.ResourceName, b.Host)
	return nil
}

func aclsDelete(x *cliRun) error {
	if err := x.args.noPositional(); err != nil {
		return err
	}
	f, err := aclBinding(x.args, true)
	if err != nil {
		return err
	}
	empty := f == apiACL{}
	if empty && !x.args.flag("all") {
		return usagef("no filter given: that deletes every ACL; say so with --all")
	}
	if !empty && x.args.flag("all") {
		return usagef("--all deletes every ACL: give it without filters")
	}
	var out struct {
		Deleted []apiACL `json:"deleted"`
	}
	if printed, err := x.request(http.MethodDelete, "/api/v1/acls", nil, f, &out); printed || err != nil {
		return err
	}
	x.printf("deleted %d ACLs\n", len(out.Deleted))
	if len(out.Deleted) == 0 {
		return nil
	}
	return x.printACLs(out.Deleted)
}
