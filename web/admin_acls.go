package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACL routes: DescribeAcls, CreateAcls, DeleteAcls. Enum fields are lower
// case on output; Kafka's spellings (TOPIC, TRANSACTIONAL_ID, Prefixed)
// are accepted on input.

// aclJSON is an ACL binding, or a filter when used to describe or delete
// (empty fields then match anything).
type aclJSON struct {
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	Pattern      string `json:"pattern"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

// kafkaACL is an ACL binding or filter in Kafka's enums.
type kafkaACL struct {
	rt   kmsg.ACLResourceType
	name *string
	pt   kmsg.ACLResourcePatternType
	prin *string
	host *string
	op   kmsg.ACLOperation
	perm kmsg.ACLPermissionType
}

// parseACL reads a binding (filter false: every field but host, pattern
// and permission required) or a filter (empty fields are "any").
func parseACL(a aclJSON, filter bool) (kafkaACL, error) {
	var k kafkaACL
	var err error
	enum := func(field, v, def string, parse func(string) error) {
		if err != nil {
			return
		}
		if v == "" {
			if def == "" {
				err = invalid("field " + field + " is missing")
				return
			}
			v = def
		}
		if perr := parse(v); perr != nil {
			err = invalid(fmt.Sprintf("field %s: %q is not one of Kafka's names for it", field, v))
		}
	}
	anyOr := func(def string) string {
		if filter {
			return "any"
		}
		return def
	}
	enum("resource_type", a.ResourceType, anyOr(""), func(v string) (e error) { k.rt, e = kmsg.ParseACLResourceType(v); return })
	enum("pattern", a.Pattern, anyOr("literal"), func(v string) (e error) { k.pt, e = kmsg.ParseACLResourcePatternType(v); return })
	enum("operation", a.Operation, anyOr(""), func(v string) (e error) { k.op, e = kmsg.ParseACLOperation(v); return })
	enum("permission", a.Permission, anyOr("allow"), func(v string) (e error) { k.perm, e = kmsg.ParseACLPermissionType(v); return })
	if err != nil {
		return k, err
	}
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	k.name, k.prin, k.host = opt(a.ResourceName), opt(a.Principal), opt(a.Host)
	if filter {
		return k, nil
	}
	if k.rt == kmsg.ACLResourceTypeCluster && k.name == nil {
		k.name = kmsg.StringPtr("kafka-cluster")
	}
	switch {
	case k.name == nil:
		return k, invalid("field resource_name is missing")
	case k.prin == nil:
		return k, invalid(`field principal is missing (as "User:name")`)
	case k.host == nil:
		k.host = kmsg.StringPtr("*")
	}
	return k, nil
}

func aclOut(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, prin, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) aclJSON {
	return aclJSON{ResourceType: strings.ToLower(rt.String()), ResourceName: name, Pattern: strings.ToLower(pt.String()), Principal: prin, Host: host,
		Operation: strings.ToLower(op.String()), Permission: strings.ToLower(perm.String())}
}

// aclQuery reads a filter from the query string.
func aclQuery(r *http.Request) aclJSON {
	q := r.URL.Query()
	return aclJSON{ResourceType: q.Get("resource_type"), ResourceName: q.Get("resource_name"), Pattern: q.Get("pattern"),
		Principal: q.Get("principal"), Host: q.Get("host"), Operation: q.Get("operation"), Permission: q.Get("permission")}
}

func (s *server) aclsList(w http.ResponseWriter, r *http.Request) {
	f, err := parseACL(aclQuery(r), true)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	out, err := s.describeACLs(ctx, r, f)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"acls": out})
}

func (s *server) describeACLs(ctx context.Context, r *http.Request, f kafkaACL) ([]aclJSON, error) {
	if err := s.aclsOn(); err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = f.rt, f.name, f.pt
	req.Principal, req.Host, req.Operation, req.PermissionType = f.prin, f.host, f.op, f.perm
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	resp := kr.(*kmsg.DescribeACLsResponse)
	if err := kafkaError(resp.ErrorCode, resp.ErrorMessage, "describe ACLs"); err != nil {
		return nil, err
	}
	out := []aclJSON{}
	for _, res := range resp.Resources {
		for _, a := range res.ACLs {
			out = append(out, aclOut(res.ResourceType, res.ResourceName, res.ResourcePatternType, a.Principal, a.Host, a.Operation, a.PermissionType))
		}
	}
	sortACLs(out)
	return out, nil
}

func sortACLs(as []aclJSON) {
	sort.Slice(as, func(i, j int) bool {
		return fmt.Sprint(as[i]) < fmt.Sprint(as[j])
	})
}

// aclsOn: with ACLs off korvet serves no ACL APIs (nothing would enforce
// them); say how to turn them on.
func (s *server) aclsOn() error {
	if p := s.opts.Policy; p == nil || !p.ACLs {
		return &apiError{status: http.StatusBadRequest, code: "security_disabled", msg: "ACLs are off on this korvet: set kafka.acls = true in korvet.toml to manage and enforce them"}
	}
	return nil
}

func (s *server) aclCreate(w http.ResponseWriter, r *http.Request) {
	var b aclJSON
	err := decodeBody(w, r, &b)
	var out aclJSON
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
		defer cancel()
		out, err = s.createACL(ctx, r, b)
	}
	s.finish(w, r, "acl.create", aclResource(b), http.StatusCreated, out, err)
}

// aclResource names an ACL in the audit line.
func aclResource(a aclJSON) string {
	return fmt.Sprintf("acl:%s:%s:%s principal:%s op:%s %s", a.ResourceType, a.Pattern, a.ResourceName, a.Principal, a.Operation, a.Permission)
}

func (s *server) createACL(ctx context.Context, r *http.Request, b aclJSON) (aclJSON, error) {
	if err := s.aclsOn(); err != nil {
		return aclJSON{}, err
	}
	k, err := parseACL(b, false)
	if err != nil {
		return aclJSON{}, err
	}
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = k.rt, *k.name, k.pt
	c.Principal, c.Host, c.Operation, c.PermissionType = *k.prin, *k.host, k.op, k.perm
	req.Creations = append(req.Creations, c)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return aclJSON{}, err
	}
	for _, res := range kr.(*kmsg.CreateACLsResponse).Results {
		if err := kafkaError(res.ErrorCode, res.ErrorMessage, "create ACL"); err != nil {
			return aclJSON{}, err
		}
	}
	return aclOut(k.rt, *k.name, k.pt, *k.prin, *k.host, k.op, k.perm), nil
}

func (s *server) aclDelete(w http.ResponseWriter, r *http.Request) {
	// The filter is the JSON body, or the query string without one.
	f := aclQuery(r)
	var err error
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		f = aclJSON{}
		err = decodeBody(w, r, &f)
	}
	var out []aclJSON
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
		defer cancel()
		out, err = s.deleteACLs(ctx, r, f)
	}
	s.finish(w, r, "acl.delete", aclResource(f), http.StatusOK, map[string]any{"deleted": out}, err)
}

func (s *server) deleteACLs(ctx context.Context, r *http.Request, b aclJSON) ([]aclJSON, error) {
	if err := s.aclsOn(); err != nil {
		return nil, err
	}
	k, err := parseACL(b, true)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = k.rt, k.name, k.pt
	f.Principal, f.Host, f.Operation, f.PermissionType = k.prin, k.host, k.op, k.perm
	req.Filters = append(req.Filters, f)
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	out := []aclJSON{}
	for _, res := range kr.(*kmsg.DeleteACLsResponse).Results {
		if err := kafkaError(res.ErrorCode, res.ErrorMessage, "delete ACLs"); err != nil {
			return nil, err
		}
		for _, m := range res.MatchingACLs {
			if err := kafkaError(m.ErrorCode, m.ErrorMessage, "delete ACL"); err != nil {
				return nil, err
			}
			out = append(out, aclOut(m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host, m.Operation, m.PermissionType))
		}
	}
	sortACLs(out)
	return out, nil
}
