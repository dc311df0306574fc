package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// Authorization. With Options.ACLs on, every request passes the rule of its
// API (its entry in apiTable; the rule lives in the API's file) before its
// handler runs (handle below). A rule checks what the request touches with
// c.authorize, answers at once when the request is refused as a whole, and
// otherwise takes the refused topics or groups out of the request and adds
// them back to the response with an authorization error. Handlers
// therefore never see what the principal may not touch, and need no checks
// of their own. An API without a rule is refused to everyone but super
// users; TestEveryAPIHasACLRule keeps the table complete.

var (
	topicDenied   = kerr.TopicAuthorizationFailed.Code
	groupDenied   = kerr.GroupAuthorizationFailed.Code
	clusterDenied = kerr.ClusterAuthorizationFailed.Code
)

// The messages of refusals that carry one.
const (
	notClusterAuthorized = "not authorized on the cluster resource"
	manageUsersDenied    = "only super users (kafka.super_users) may describe or alter SCRAM credentials"
)

// setPrincipal names who is on the other end ("User:name").
func (c *conn) setPrincipal(p string) {
	c.principal = p
	c.super = c.s.policy.Super(p)
}

// authorize reports whether this connection's principal may do op on the
// named resource: the policy every door of korvet shares.
func (c *conn) authorize(op auth.Operation, rt auth.ResourceType, name string) bool {
	return c.super || c.s.policy.Allowed(c.principal, c.host, op, rt, name)
}

func (c *conn) authorizeCluster(op auth.Operation) bool {
	return c.authorize(op, auth.ResCluster, auth.ClusterName)
}

// mayCreate: Kafka lets CREATE on the cluster or on the topic create it.
func (c *conn) mayCreate(topic string) bool {
	return c.authorizeCluster(auth.OpCreate) || c.authorize(auth.OpCreate, auth.ResTopic, topic)
}

// topicCode is 0 when op on topic is allowed, else the error to answer.
func (c *conn) topicCode(op auth.Operation, topic string) int16 {
	if c.authorize(op, auth.ResTopic, topic) {
		return 0
	}
	return topicDenied
}

func (c *conn) groupCode(op auth.Operation, group string) int16 {
	if c.authorize(op, auth.ResGroup, group) {
		return 0
	}
	return groupDenied
}

// configCode authorizes op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
// resource: a topic, or the broker, whose configs are the cluster's.
func (c *conn) configCode(op auth.Operation, rt kmsg.ConfigResourceType, name string) int16 {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return c.topicCode(op, name)
	case kmsg.ConfigResourceTypeGroupConfig:
		return c.groupCode(op, name)
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if c.authorizeCluster(op) {
			return 0
		}
		return clusterDenied
	}
	return 0 // the handler refuses what it does not know
}

// topicName resolves a topic named by id; "" when unknown, which rules let
// through so that the handler answers UNKNOWN_TOPIC_ID.
func (c *conn) topicName(name string, id [16]byte) string {
	if name != "" || id == [16]byte{} {
		return name
	}
	if t := c.s.eng.TopicByID(id); t != nil {
		return t.Name()
	}
	return ""
}

// autoCreates: the topic does not exist and the request would create it,
// which needs CREATE.
func (c *conn) autoCreates(topic string) bool {
	return c.s.eng.AutoCreate() && c.s.eng.Topic(topic) == nil && !c.mayCreate(topic)
}

// mayManageUsers: only a super user that is not anonymous may describe
// or change SCRAM credentials, whatever the ACLs say. (User:ANONYMOUS as a
// super user gives anonymous clients the rest, not the passwords.)
func (c *conn) mayManageUsers() bool {
	return c.super && c.principal != auth.Anonymous && c.principal != ""
}

// handle runs a's handler for req behind a's authorization rule.
func (c *conn) handle(ctx context.Context, a apiDef, req kmsg.Request) func() kmsg.Response {
	// The SCRAM user APIs are closed to all but super users even with
	// ACLs off: anyone who may set a password may log in as anyone. Their
	// rules refuse whoever may not manage users.
	if k := kmsg.Key(req.Key()); (k == kmsg.DescribeUserSCRAMCredentials || k == kmsg.AlterUserSCRAMCredentials) && !c.mayManageUsers() {
		c.s.log.Info("SCRAM user API refused: not a super user", "api", kmsg.NameForKey(req.Key()), "principal", c.principal, "remote", c.nc.RemoteAddr())
		deny, _ := a.rule(c, req)
		return func() kmsg.Response { return deny }
	}
	if !c.s.opts.ACLs || c.super {
		return a.handle(ctx, c, req)
	}
	if a.rule == nil {
		c.s.log.Error("closing connection: no authorization rule for API", "api", kmsg.NameForKey(req.Key()), "principal", c.principal)
		c.hangup = true
		return func() kmsg.Response { return nil }
	}
	deny, after := a.rule(c, req)
	if deny != nil {
		c.s.log.Debug("request refused", "api", kmsg.NameForKey(req.Key()), "principal", c.principal, "remote", c.nc.RemoteAddr())
		return func() kmsg.Response { return deny }
	}
	finish := a.handle(ctx, c, req)
	if after == nil {
		return finish
	}
	return func() kmsg.Response {
		r := finish()
		if r != nil {
			after(r)
		}
		return r
	}
}

// aclRule is the authorization rule of an API. It returns a response when
// the request is refused as a whole; otherwise it may prune the request
// and return a func that completes the handler's response.
type aclRule func(c *conn, req kmsg.Request) (deny kmsg.Response, after func(kmsg.Response))

// allowAll is the rule of the APIs anyone may call: SASL and ApiVersions
// come before authorization, and DescribeCluster needs no permission in
// Kafka either.
func allowAll(*conn, kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return nil, nil }

// refused is an item taken out of a request, with the error to answer.
type refused[T any] struct {
	item T
	code int16
}

// sift keeps, in place, the items for which code returns 0 and returns
// the others.
func sift[T any](items []T, code func(*T) int16) ([]T, []refused[T]) {
	var out []refused[T]
	kept := items[:0]
	for i := range items {
		if cd := code(&items[i]); cd != 0 {
			out = append(out, refused[T]{items[i], cd})
			continue
		}
		kept = append(kept, items[i])
	}
	return kept, out
}
