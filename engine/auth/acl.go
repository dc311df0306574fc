package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/korvet/korvet/engine/events"
	"github.com/korvet/korvet/resp"
)

// The ACL enums carry Kafka's wire codes, so the Kafka server converts
// them with a cast; in Redis they are stored by name.

// Operation is an ACL operation.
type Operation int8

// Operations. Any only appears in filters.
const (
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
)

// ResourceType is the kind of thing an ACL guards.
type ResourceType int8

// Resource types. Any only appears in filters; ACLs are for topics,
// groups and the cluster (korvet has no transactions, delegation tokens or
// quotas for the others to guard).
const (
	ResAny             ResourceType = 1
	ResTopic           ResourceType = 2
	ResGroup           ResourceType = 3
	ResCluster         ResourceType = 4
	ResTransactionalID ResourceType = 5
	ResDelegationToken ResourceType = 6
	ResUser            ResourceType = 7
)

// ClusterName is the one cluster resource's name, as in Kafka.
const ClusterName = "kafka-cluster"

// PatternType says how an ACL's resource name matches.
type PatternType int8

// Pattern types. Any and Match only appear in filters: Match finds every
// ACL that applies to the filter's name.
const (
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Permission allows or denies. Any only appears in filters.
type Permission int8

// Permissions.
const (
	PermAny   Permission = 1
	PermDeny  Permission = 2
	PermAllow Permission = 3
)

// Wildcard matches every principal ("User:*"), host or literal resource
// name.
const Wildcard = "*"

// ErrInvalidACL is returned for an ACL or filter korvet will not accept.
var ErrInvalidACL = errors.New("invalid ACL")

var (
	opNames = map[Operation]string{OpAny: "any", OpAll: "all", OpRead: "read", OpWrite: "write", OpCreate: "create",
		OpDelete: "delete", OpAlter: "alter", OpDescribe: "describe", OpClusterAction: "cluster_action",
		OpDescribeConfigs: "describe_configs", OpAlterConfigs: "alter_configs", OpIdempotentWrite: "idempotent_write"}
	resNames = map[ResourceType]string{ResAny: "any", ResTopic: "topic", ResGroup: "group", ResCluster: "cluster",
		ResTransactionalID: "transactional_id", ResDelegationToken: "delegation_token", ResUser: "user"}
	patternNames = map[PatternType]string{PatternAny: "any", PatternMatch: "match", PatternLiteral: "literal", PatternPrefixed: "prefixed"}
	permNames    = map[Permission]string{PermAny: "any", PermDeny: "deny", PermAllow: "allow"}
)

func name[T ~int8](names map[T]string, v T) string {
	if n, ok := names[v]; ok {
		return n
	}
	return fmt.Sprintf("unknown(%d)", int8(v))
}

func parse[T ~int8](names map[T]string, what string, b []byte) (T, error) {
	for v, n := range names {
		if strings.EqualFold(n, string(b)) {
			return v, nil
		}
	}
	var zero T
	return zero, fmt.Errorf("%w: unknown %s %q", ErrInvalidACL, what, b)
}

func (o Operation) String() string    { return name(opNames, o) }
func (r ResourceType) String() string { return name(resNames, r) }
func (p PatternType) String() string  { return name(patternNames, p) }
func (p Permission) String() string   { return name(permNames, p) }

// MarshalText and UnmarshalText store the enums by name.
func (o Operation) MarshalText() ([]byte, error)    { return []byte(o.String()), nil }
func (r ResourceType) MarshalText() ([]byte, error) { return []byte(r.String()), nil }
func (p PatternType) MarshalText() ([]byte, error)  { return []byte(p.String()), nil }
func (p Permission) MarshalText() ([]byte, error)   { return []byte(p.String()), nil }

func (o *Operation) UnmarshalText(b []byte) (err error) {
	*o, err = parse(opNames, "operation", b)
	return err
}

func (r *ResourceType) UnmarshalText(b []byte) (err error) {
	*r, err = parse(resNames, "resource type", b)
	return err
}

func (p *PatternType) UnmarshalText(b []byte) (err error) {
	*p, err = parse(patternNames, "pattern type", b)
	return err
}

func (p *Permission) UnmarshalText(b []byte) (err error) {
	*p, err = parse(permNames, "permission", b)
	return err
}

// ACL allows or denies a principal connecting from a host an operation on
// the resources a pattern matches.
type ACL struct {
	Principal    string       `json:"principal"` // "User:name" or "User:*"
	Host         string       `json:"host"`      // an IP address or "*"
	ResourceType ResourceType `json:"resource_type"`
	Pattern      PatternType  `json:"pattern"`
	Resource     string       `json:"resource"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

func (a ACL) String() string {
	return fmt.Sprintf("%s %s on %s %s:%q for %s from %s", a.Permission, a.Operation, a.Pattern, a.ResourceType, a.Resource, a.Principal, a.Host)
}

// Validate checks that a can be stored and enforced.
func (a ACL) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidACL, fmt.Sprintf(format, args...))
	}
	switch a.ResourceType {
	case ResTopic, ResGroup, ResCluster, ResTransactionalID:
	default:
		return bad("resource type %s is not supported (use topic, group, cluster or transactional_id)", a.ResourceType)
	}
	switch a.Pattern {
	case PatternLiteral:
	case PatternPrefixed:
		if a.Resource == Wildcard {
			return bad("a prefixed pattern cannot be %q; use a literal %q", Wildcard, Wildcard)
		}
	default:
		return bad("pattern type %s (use literal or prefixed)", a.Pattern)
	}
	if a.Resource == "" {
		return bad("empty resource name")
	}
	if a.ResourceType == ResCluster && (a.Resource != ClusterName || a.Pattern != PatternLiteral) {
		return bad("the cluster resource is the literal %q", ClusterName)
	}
	if user, ok := strings.CutPrefix(a.Principal, "User:"); !ok || user == "" {
		return bad("principal %q (use User:name or User:*)", a.Principal)
	}
	if a.Host != Wildcard && net.ParseIP(a.Host) == nil {
		return bad("host %q (use an IP address or *)", a.Host)
	}
	if _, ok := opNames[a.Operation]; !ok || a.Operation == OpAny {
		return bad("operation %s", a.Operation)
	}
	if a.Permission != PermAllow && a.Permission != PermDeny {
		return bad("permission %s (use allow or deny)", a.Permission)
	}
	return nil
}

// Filter selects ACLs. Empty strings match anything; so do the Any values.
type Filter struct {
	ResourceType ResourceType
	Pattern      PatternType
	Resource     *string
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Matches reports whether f selects a, with Kafka's semantics: a Match
// pattern selects every ACL that would apply to the filter's resource name
// (literal equal, literal wildcard, prefixes of it).
func (f Filter) Matches(a ACL) bool {
	if f.ResourceType != ResAny && f.ResourceType != a.ResourceType {
		return false
	}
	if f.Pattern != PatternAny && f.Pattern != PatternMatch && f.Pattern != a.Pattern {
		return false
	}
	if f.Resource != nil {
		n := *f.Resource
		switch {
		case f.Pattern != PatternMatch:
			if n != a.Resource {
				return false
			}
		case !resourceMatches(a, n):
			return false
		}
	}
	return (f.Principal == nil || *f.Principal == a.Principal) &&
		(f.Host == nil || *f.Host == a.Host) &&
		(f.Operation == OpAny || f.Operation == a.Operation) &&
		(f.Permission == PermAny || f.Permission == a.Permission)
}

// Validate checks a filter of DescribeAcls or DeleteAcls.
func (f Filter) Validate() error {
	if _, ok := resNames[f.ResourceType]; !ok {
		return fmt.Errorf("%w: resource type %s", ErrInvalidACL, f.ResourceType)
	}
	if _, ok := patternNames[f.Pattern]; !ok {
		return fmt.Errorf("%w: pattern type %s", ErrInvalidACL, f.Pattern)
	}
	if _, ok := opNames[f.Operation]; !ok {
		return fmt.Errorf("%w: operation %s", ErrInvalidACL, f.Operation)
	}
	if _, ok := permNames[f.Permission]; !ok {
		return fmt.Errorf("%w: permission %s", ErrInvalidACL, f.Permission)
	}
	return nil
}

func resourceMatches(a ACL, name string) bool {
	if a.Pattern == PatternPrefixed {
		return strings.HasPrefix(name, a.Resource)
	}
	return a.Resource == name || a.Resource == Wildcard
}

func (a ACL) appliesTo(principal, host string) bool {
	return (a.Principal == principal || a.Principal == "User:"+Wildcard) && (a.Host == Wildcard || a.Host == host)
}

// implies reports whether an ACL for op covers want: ALL covers
// everything, and as in Kafka, READ, WRITE, DELETE and ALTER each imply
// DESCRIBE, and ALTER_CONFIGS implies DESCRIBE_CONFIGS.
func implies(op, want Operation) bool {
	switch {
	case op == want, op == OpAll:
		return true
	case want == OpDescribe:
		return op == OpRead || op == OpWrite || op == OpDelete || op == OpAlter
	case want == OpDescribeConfigs:
		return op == OpAlterConfigs
	}
	return false
}

// aclSet is the in-memory copy of the ACLs; raw[i] is the Redis set member
// of list[i], so that deleting removes exactly what was stored.
type aclSet struct {
	list []ACL
	raw  []string
}

// Authorize decides whether principal ("User:name") at host (an IP) may do
// op on the named resource. With no ACL for the resource the answer is
// no; a matching deny beats any allow.
func (s *Store) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	allowed := false
	for _, a := range s.acls.Load().list {
		if a.ResourceType != rt || !resourceMatches(a, name) || !a.appliesTo(principal, host) {
			continue
		}
		switch {
		case a.Permission == PermDeny && (a.Operation == op || a.Operation == OpAll):
			return false
		case a.Permission == PermAllow && implies(a.Operation, op):
			allowed = true
		}
	}
	return allowed
}

// AuthorizeAny reports whether principal may do op on at least one
// resource of type rt: some allow ACL grants it that no deny ACL takes
// back entirely. Kafka asks this of idempotent producers (WRITE on any
// topic).
func (s *Store) AuthorizeAny(principal, host string, op Operation, rt ResourceType) bool {
	list := s.acls.Load().list
	denied := func(a ACL) bool {
		for _, d := range list {
			if d.Permission != PermDeny || d.ResourceType != rt || !d.appliesTo(principal, host) || (d.Operation != op && d.Operation != OpAll) {
				continue
			}
			switch {
			case d.Pattern == PatternLiteral && d.Resource == Wildcard:
				return true
			case d.Pattern == PatternPrefixed && strings.HasPrefix(a.Resource, d.Resource):
				return true
			case a.Pattern == PatternLiteral && d.Pattern == PatternLiteral && d.Resource == a.Resource:
				return true
			}
		}
		return false
	}
	for _, a := range list {
		if a.Permission == PermAllow && a.ResourceType == rt && a.appliesTo(principal, host) && implies(a.Operation, op) && !denied(a) {
			return true
		}
	}
	return false
}

// ACLs returns the ACLs f selects.
func (s *Store) ACLs(f Filter) []ACL {
	var out []ACL
	for _, a := range s.acls.Load().list {
		if f.Matches(a) {
			out = append(out, a)
		}
	}
	return out
}

// CreateACLs stores acls (already validated); an ACL that exists is left
// as it is.
func (s *Store) CreateACLs(ctx context.Context, acls []ACL) error {
	if len(acls) == 0 {
		return nil
	}
	s.aclMu.Lock()
	defer s.aclMu.Unlock()
	cur := s.acls.Load()
	next := &aclSet{list: slices.Clone(cur.list), raw: slices.Clone(cur.raw)}
	args := []any{"SADD", s.k.ACLs()}
	for _, a := range acls {
		if slices.Contains(next.list, a) {
			continue
		}
		js, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("create ACL %s: %w", a, err)
		}
		args = append(args, js)
		next.list = append(next.list, a)
		next.raw = append(next.raw, string(js))
	}
	if len(args) == 2 {
		return nil
	}
	if _, err := s.rc.Do(ctx, args...); err != nil {
		return fmt.Errorf("create ACLs: %w", err)
	}
	s.acls.Store(next)
	s.announce(ctx, events.ACL)
	for _, a := range next.list[len(cur.list):] {
		s.log.Info("ACL created", "acl", a.String())
	}
	return nil
}

// DeleteACLs removes the ACLs each filter selects and returns them, per
// filter.
func (s *Store) DeleteACLs(ctx context.Context, filters []Filter) ([][]ACL, error) {
	s.aclMu.Lock()
	defer s.aclMu.Unlock()
	cur := s.acls.Load()
	out := make([][]ACL, len(filters))
	next := &aclSet{}
	args := []any{"SREM", s.k.ACLs()}
	for i, a := range cur.list {
		hit := false
		for fi, f := range filters {
			if f.Matches(a) {
				out[fi] = append(out[fi], a)
				hit = true
			}
		}
		if hit {
			args = append(args, cur.raw[i])
			continue
		}
		next.list = append(next.list, a)
		next.raw = append(next.raw, cur.raw[i])
	}
	if len(args) == 2 {
		return out, nil
	}
	if _, err := s.rc.Do(ctx, args...); err != nil {
		return nil, fmt.Errorf("delete ACLs: %w", err)
	}
	s.acls.Store(next)
	s.announce(ctx, events.ACL)
	for _, a := range cur.list {
		if !slices.Contains(next.list, a) {
			s.log.Info("ACL deleted", "acl", a.String())
		}
	}
	return out, nil
}

func (s *Store) loadACLs(ctx context.Context) error {
	r, err := s.rc.Do(ctx, "SMEMBERS", s.k.ACLs())
	if err != nil {
		return fmt.Errorf("load ACLs: %w", err)
	}
	set := &aclSet{}
	var elems []resp.Reply
	for _, e := range r.Elems(elems) {
		var a ACL
		if err := json.Unmarshal(e.Bytes(), &a); err != nil {
			return fmt.Errorf("load ACLs: bad member %q of %s: %w", e.Bytes(), s.k.ACLs(), err)
		}
		if err := a.Validate(); err != nil {
			return fmt.Errorf("load ACLs: member %q of %s: %w", e.Bytes(), s.k.ACLs(), err)
		}
		set.list = append(set.list, a)
		set.raw = append(set.raw, string(e.Bytes()))
	}
	s.acls.Store(set)
	s.log.Debug("ACLs loaded", "count", len(set.list))
	return nil
}
