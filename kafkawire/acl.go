package kafkawire

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// Authorization. With Options.ACLs on, every request passes a rule for its
// API before its handler runs (handle below). A rule checks what the
// request touches with c.authorize, answers at once when the request is
// refused as a whole, and otherwise takes the refused topics or groups out
// of the request and adds them back to the response with an
// authorization error. Handlers therefore never see what the principal
// may not touch, and need no checks of their own. An API without a rule
// is refused to everyone but super users; TestEveryAPIHasACLRule keeps
// the table complete.

var (
	topicDenied   = kerr.TopicAuthorizationFailed.Code
	groupDenied   = kerr.GroupAuthorizationFailed.Code
	clusterDenied = kerr.ClusterAuthorizationFailed.Code
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

// handle runs h for req behind its API's authorization rule.
func (c *conn) handle(ctx context.Context, h handler, req kmsg.Request) func() kmsg.Response {
	// The SCRAM user APIs are closed to all but super users even with
	// ACLs off: anyone who may set a password may log in as anyone.
	if deny := c.scramAdminDenied(req); deny != nil {
		c.s.log.Info("SCRAM user API refused: not a super user", "api", kmsg.NameForKey(req.Key()), "principal", c.principal, "remote", c.nc.RemoteAddr())
		return func() kmsg.Response { return deny }
	}
	if !c.s.opts.ACLs || c.super {
		return h(ctx, c, req)
	}
	rule := aclRule(req.Key())
	if rule == nil {
		c.s.log.Error("closing connection: no authorization rule for API", "api", kmsg.NameForKey(req.Key()), "principal", c.principal)
		c.hangup = true
		return func() kmsg.Response { return nil }
	}
	deny, after := rule(c, req)
	if deny != nil {
		c.s.log.Debug("request refused", "api", kmsg.NameForKey(req.Key()), "principal", c.principal, "remote", c.nc.RemoteAddr())
		return func() kmsg.Response { return deny }
	}
	finish := h(ctx, c, req)
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

// aclRule is the authorization rule of an API, or nil when it has none.
// A rule returns a response when the request is refused as a whole;
// otherwise it may prune the request and return a func that completes
// the handler's response.
type aclRuleFunc func(c *conn, req kmsg.Request) (deny kmsg.Response, after func(kmsg.Response))

func aclRule(key int16) aclRuleFunc {
	switch key {
	case 0:
		return aclProduce
	case 1:
		return aclFetch
	case 2:
		return aclListOffsets
	case 3:
		return aclMetadata
	case 8:
		return aclOffsetCommit
	case 9:
		return aclOffsetFetch
	case 10:
		return aclFindCoordinator
	case 11, 12, 13, 14:
		return aclGroupMember
	case 15:
		return aclDescribeGroups
	case 16:
		return aclListGroups
	case 17, 18, 36, 60:
		// SASL and ApiVersions come before authorization; DescribeCluster
		// needs no permission in Kafka either.
		return allowAll
	case 19:
		return aclCreateTopics
	case 20:
		return aclDeleteTopics
	case 21:
		return aclDeleteRecords
	case 22:
		return aclInitProducerID
	case 23:
		return aclOffsetForLeaderEpoch
	case 29, 30, 31, 35:
		return aclClusterAdmin
	case 50, 51:
		return aclSuperOnly
	case 32:
		return aclDescribeConfigs
	case 33:
		return aclAlterConfigs
	case 37:
		return aclCreatePartitions
	case 42:
		return aclDeleteGroups
	case 44:
		return aclIncrementalAlterConfigs
	case 47:
		return aclOffsetDelete
	case 61:
		return aclDescribeProducers
	}
	return nil
}

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

func aclProduce(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.ProduceRequest)
	var out []refused[kmsg.ProduceRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.ProduceRequestTopic) int16 {
		name := t.Topic
		if req.Version >= 13 {
			name = c.topicName("", t.TopicID)
		}
		switch {
		case name == "":
			return 0
		case !c.authorize(auth.OpWrite, auth.ResTopic, name), req.Version < 13 && c.autoCreates(name):
			return topicDenied
		}
		return 0
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ProduceResponse)
		for _, o := range out {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = o.item.Topic, o.item.TopicID
			for _, p := range o.item.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, o.code
				sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}

func aclFetch(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.FetchRequest)
	var out []refused[kmsg.FetchRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.FetchRequestTopic) int16 {
		name := t.Topic
		if req.Version >= 13 {
			name = c.topicName("", t.TopicID)
		}
		if name == "" {
			return 0
		}
		return c.topicCode(auth.OpRead, name)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.FetchResponse)
		for _, o := range out {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = o.item.Topic, o.item.TopicID
			for _, p := range o.item.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, o.code
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				sp.RecordBatches = []byte{}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}

func aclListOffsets(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.ListOffsetsRequest)
	var out []refused[kmsg.ListOffsetsRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.ListOffsetsRequestTopic) int16 { return c.topicCode(auth.OpDescribe, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListOffsetsResponse)
		for _, o := range out {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, o.code
				sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}

func aclOffsetForLeaderEpoch(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.OffsetForLeaderEpochRequest)
	var out []refused[kmsg.OffsetForLeaderEpochRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) int16 { return c.topicCode(auth.OpDescribe, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetForLeaderEpochResponse)
		for _, o := range out {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.LeaderEpoch, sp.EndOffset = p.Partition, o.code, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}

func aclDeleteRecords(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DeleteRecordsRequest)
	var out []refused[kmsg.DeleteRecordsRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.DeleteRecordsRequestTopic) int16 { return c.topicCode(auth.OpDelete, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteRecordsResponse)
		for _, o := range out {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.LowWatermark = p.Partition, o.code, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}

func aclDescribeProducers(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DescribeProducersRequest)
	var out []refused[kmsg.DescribeProducersRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.DescribeProducersRequestTopic) int16 { return c.topicCode(auth.OpRead, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeProducersResponse)
		for _, o := range out {
			st := kmsg.NewDescribeProducersResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewDescribeProducersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, o.code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}

func aclMetadata(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.MetadataRequest)
	var out []refused[kmsg.MetadataRequestTopic]
	if all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0; !all {
		autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
		req.Topics, out = sift(req.Topics, func(t *kmsg.MetadataRequestTopic) int16 {
			var name string
			if t.Topic != nil {
				name = *t.Topic
			} else if name = c.topicName("", t.TopicID); name == "" {
				return 0
			}
			switch {
			case !c.authorize(auth.OpDescribe, auth.ResTopic, name):
				return topicDenied
			case t.Topic != nil && autoCreate && c.autoCreates(name):
				return topicDenied
			}
			return 0
		})
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.MetadataResponse)
		// Whatever was asked, list only topics the principal may
		// describe: a v0 request pruned to nothing asks for all.
		resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.MetadataResponseTopic) bool {
			return t.Topic != nil && !c.authorize(auth.OpDescribe, auth.ResTopic, *t.Topic)
		})
		for _, o := range out {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.ErrorCode = o.item.Topic, o.item.TopicID, o.code
			resp.Topics = append(resp.Topics, mt)
		}
	}
}

func aclCreateTopics(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.CreateTopicsRequest)
	var out []refused[kmsg.CreateTopicsRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.CreateTopicsRequestTopic) int16 {
		if c.mayCreate(t.Topic) {
			return 0
		}
		return topicDenied
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.CreateTopicsResponse)
		for _, o := range out {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = o.item.Topic, o.code
			st.NumPartitions, st.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, st)
		}
	}
}

func aclDeleteTopics(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DeleteTopicsRequest)
	var outNames []refused[string]
	var outTopics []refused[kmsg.DeleteTopicsRequestTopic]
	req.TopicNames, outNames = sift(req.TopicNames, func(n *string) int16 { return c.topicCode(auth.OpDelete, *n) })
	req.Topics, outTopics = sift(req.Topics, func(t *kmsg.DeleteTopicsRequestTopic) int16 {
		name := c.topicName(deref(t.Topic), t.TopicID)
		if name == "" {
			return 0
		}
		return c.topicCode(auth.OpDelete, name)
	})
	if len(outNames)+len(outTopics) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteTopicsResponse)
		for _, o := range outNames {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.ErrorCode = &o.item, o.code
			resp.Topics = append(resp.Topics, st)
		}
		for _, o := range outTopics {
			st := kmsg.NewDeleteTopicsResponseTopic()
			// A topic named by id stays unnamed: no leaking names.
			st.Topic, st.TopicID, st.ErrorCode = o.item.Topic, o.item.TopicID, o.code
			resp.Topics = append(resp.Topics, st)
		}
	}
}

func aclCreatePartitions(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.CreatePartitionsRequest)
	var out []refused[kmsg.CreatePartitionsRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.CreatePartitionsRequestTopic) int16 { return c.topicCode(auth.OpAlter, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.CreatePartitionsResponse)
		for _, o := range out {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode = o.item.Topic, o.code
			resp.Topics = append(resp.Topics, st)
		}
	}
}

// configCode authorizes op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
// resource: a topic, or the broker, whose configs are the cluster's.
func (c *conn) configCode(op auth.Operation, rt kmsg.ConfigResourceType, name string) int16 {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return c.topicCode(op, name)
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if c.authorizeCluster(op) {
			return 0
		}
		return clusterDenied
	}
	return 0 // the handler refuses what it does not know
}

func aclDescribeConfigs(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DescribeConfigsRequest)
	var out []refused[kmsg.DescribeConfigsRequestResource]
	req.Resources, out = sift(req.Resources, func(r *kmsg.DescribeConfigsRequestResource) int16 {
		return c.configCode(auth.OpDescribeConfigs, r.ResourceType, r.ResourceName)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeConfigsResponse)
		for _, o := range out {
			sr := kmsg.NewDescribeConfigsResponseResource()
			sr.ResourceType, sr.ResourceName, sr.ErrorCode = o.item.ResourceType, o.item.ResourceName, o.code
			resp.Resources = append(resp.Resources, sr)
		}
	}
}

func aclAlterConfigs(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.AlterConfigsRequest)
	var out []refused[kmsg.AlterConfigsRequestResource]
	req.Resources, out = sift(req.Resources, func(r *kmsg.AlterConfigsRequestResource) int16 {
		return c.configCode(auth.OpAlterConfigs, r.ResourceType, r.ResourceName)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.AlterConfigsResponse)
		for _, o := range out {
			sr := kmsg.NewAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName, sr.ErrorCode = o.item.ResourceType, o.item.ResourceName, o.code
			resp.Resources = append(resp.Resources, sr)
		}
	}
}

func aclIncrementalAlterConfigs(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.IncrementalAlterConfigsRequest)
	var out []refused[kmsg.IncrementalAlterConfigsRequestResource]
	req.Resources, out = sift(req.Resources, func(r *kmsg.IncrementalAlterConfigsRequestResource) int16 {
		return c.configCode(auth.OpAlterConfigs, r.ResourceType, r.ResourceName)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.IncrementalAlterConfigsResponse)
		for _, o := range out {
			sr := kmsg.NewIncrementalAlterConfigsResponseResource()
			sr.ResourceType, sr.ResourceName, sr.ErrorCode = o.item.ResourceType, o.item.ResourceName, o.code
			resp.Resources = append(resp.Resources, sr)
		}
	}
}

// aclInitProducerID: an idempotent producer needs IDEMPOTENT_WRITE on the
// cluster or WRITE on some topic, as in Kafka 2.8+. Transactional ids are
// refused by the handler whatever the ACLs.
func aclInitProducerID(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.InitProducerIDRequest)
	if req.TransactionalID != nil || c.authorizeCluster(auth.OpIdempotentWrite) ||
		c.s.opts.Auth.AuthorizeAny(c.principal, c.host, auth.OpWrite, auth.ResTopic) {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = clusterDenied, -1, -1
	return resp, nil
}

// aclClusterAdmin guards the APIs that read or change the cluster as a
// whole: ACLs, log dirs.
func aclClusterAdmin(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	msg := kmsg.StringPtr("not authorized on the cluster resource")
	switch req := kr.(type) {
	case *kmsg.DescribeACLsRequest:
		if !c.authorizeCluster(auth.OpDescribe) {
			resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
			resp.ErrorCode, resp.ErrorMessage = clusterDenied, msg
			return resp, nil
		}
	case *kmsg.DescribeLogDirsRequest:
		if !c.authorizeCluster(auth.OpDescribe) {
			// Before v3 there is no error field: Kafka answers no dirs.
			resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
			resp.ErrorCode = clusterDenied
			return resp, nil
		}
	case *kmsg.CreateACLsRequest:
		if !c.authorizeCluster(auth.OpAlter) {
			resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
			for range req.Creations {
				r := kmsg.NewCreateACLsResponseResult()
				r.ErrorCode, r.ErrorMessage = clusterDenied, msg
				resp.Results = append(resp.Results, r)
			}
			return resp, nil
		}
	case *kmsg.DeleteACLsRequest:
		if !c.authorizeCluster(auth.OpAlter) {
			resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
			for range req.Filters {
				r := kmsg.NewDeleteACLsResponseResult()
				r.ErrorCode, r.ErrorMessage = clusterDenied, msg
				resp.Results = append(resp.Results, r)
			}
			return resp, nil
		}
	default:
		return kr.ResponseKind(), nil // unreachable: aclRule lists the keys
	}
	return nil, nil
}

// mayManageUsers: only a super user that is not anonymous may describe
// or change SCRAM credentials, whatever the ACLs say. (User:ANONYMOUS as a
// super user gives anonymous clients the rest, not the passwords.)
func (c *conn) mayManageUsers() bool {
	return c.super && c.principal != auth.Anonymous && c.principal != ""
}

// scramAdminDenied is the answer to a SCRAM user API request from a
// principal that may not manage users, nil for any other request.
func (c *conn) scramAdminDenied(kr kmsg.Request) kmsg.Response {
	if k := kr.Key(); (k != 50 && k != 51) || c.mayManageUsers() {
		return nil
	}
	msg := kmsg.StringPtr("only super users (kafka.super_users) may describe or alter SCRAM credentials")
	switch req := kr.(type) {
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
		resp.ErrorCode, resp.ErrorMessage = clusterDenied, msg
		return resp
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		for _, u := range scramAlterUsers(req) {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode, r.ErrorMessage = u, clusterDenied, msg
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
	return nil
}

// aclSuperOnly is the rule of the SCRAM user APIs; handle has refused
// them already to everyone but super users, who never reach a rule.
func aclSuperOnly(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if deny := c.scramAdminDenied(kr); deny != nil {
		return deny, nil
	}
	return nil, nil
}

// aclGroupMember: joining, syncing, heartbeating and leaving need READ on
// the group.
func aclGroupMember(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	switch req := kr.(type) {
	case *kmsg.JoinGroupRequest:
		if code := c.groupCode(auth.OpRead, req.Group); code != 0 {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation = code, -1
			return resp, nil
		}
	case *kmsg.SyncGroupRequest:
		if code := c.groupCode(auth.OpRead, req.Group); code != 0 {
			resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = code
			return resp, nil
		}
	case *kmsg.HeartbeatRequest:
		if code := c.groupCode(auth.OpRead, req.Group); code != 0 {
			resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = code
			return resp, nil
		}
	case *kmsg.LeaveGroupRequest:
		if code := c.groupCode(auth.OpRead, req.Group); code != 0 {
			resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = code
			return resp, nil
		}
	default:
		return kr.ResponseKind(), nil // unreachable: aclRule lists the keys
	}
	return nil, nil
}

// aclOffsetCommit: READ on the group and on each topic.
func aclOffsetCommit(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.OffsetCommitRequest)
	refuse := func(resp *kmsg.OffsetCommitResponse, t kmsg.OffsetCommitRequestTopic, code int16) {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if code := c.groupCode(auth.OpRead, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			refuse(resp, t, code)
		}
		return resp, nil
	}
	var out []refused[kmsg.OffsetCommitRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.OffsetCommitRequestTopic) int16 {
		name := c.topicName(t.Topic, t.TopicID)
		if name == "" {
			return 0
		}
		return c.topicCode(auth.OpRead, name)
	})
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		for _, o := range out {
			refuse(r.(*kmsg.OffsetCommitResponse), o.item, o.code)
		}
	}
}

// aclOffsetFetch: DESCRIBE on the group; topics the principal may not
// describe are refused when named and left out when all are asked for.
func aclOffsetFetch(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.OffsetFetchRequest)
	if req.Version >= 8 {
		return aclOffsetFetchGroups(c, req)
	}
	if code := c.groupCode(auth.OpDescribe, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = code
		if req.Version < 2 {
			// No top-level error before v2: every partition carries it.
			for _, t := range req.Topics {
				st := kmsg.NewOffsetFetchResponseTopic()
				st.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewOffsetFetchResponseTopicPartition()
					sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
		}
		return resp, nil
	}
	var out []refused[kmsg.OffsetFetchRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.OffsetFetchRequestTopic) int16 { return c.topicCode(auth.OpDescribe, t.Topic) })
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetFetchResponse)
		resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
			return !c.authorize(auth.OpDescribe, auth.ResTopic, t.Topic)
		})
		for _, o := range out {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, o.code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}

func aclOffsetFetchGroups(c *conn, req *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	var outGroups []refused[kmsg.OffsetFetchRequestGroup]
	req.Groups, outGroups = sift(req.Groups, func(g *kmsg.OffsetFetchRequestGroup) int16 { return c.groupCode(auth.OpDescribe, g.Group) })
	outTopics := map[string][]refused[kmsg.OffsetFetchRequestGroupTopic]{}
	for i := range req.Groups {
		g := &req.Groups[i]
		var out []refused[kmsg.OffsetFetchRequestGroupTopic]
		g.Topics, out = sift(g.Topics, func(t *kmsg.OffsetFetchRequestGroupTopic) int16 {
			name := c.topicName(t.Topic, t.TopicID)
			if name == "" {
				return 0
			}
			return c.topicCode(auth.OpDescribe, name)
		})
		if len(out) > 0 {
			outTopics[g.Group] = out
		}
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetFetchResponse)
		for i := range resp.Groups {
			sg := &resp.Groups[i]
			sg.Topics = slices.DeleteFunc(sg.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool {
				name := c.topicName(t.Topic, t.TopicID)
				return name != "" && !c.authorize(auth.OpDescribe, auth.ResTopic, name)
			})
			for _, o := range outTopics[sg.Group] {
				st := kmsg.NewOffsetFetchResponseGroupTopic()
				st.Topic, st.TopicID = o.item.Topic, o.item.TopicID
				for _, p := range o.item.Partitions {
					sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, o.code
					st.Partitions = append(st.Partitions, sp)
				}
				sg.Topics = append(sg.Topics, st)
			}
		}
		for _, o := range outGroups {
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group, sg.ErrorCode = o.item.Group, o.code
			resp.Groups = append(resp.Groups, sg)
		}
	}
}

// aclFindCoordinator: DESCRIBE on a group to find its coordinator.
// Transactional ids are refused by the handler.
func aclFindCoordinator(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.FindCoordinatorRequest)
	if req.CoordinatorType != coordinatorGroup {
		return nil, nil
	}
	if req.Version < 4 {
		code := c.groupCode(auth.OpDescribe, req.CoordinatorKey)
		if code == 0 {
			return nil, nil
		}
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
		return resp, nil
	}
	var out []refused[string]
	req.CoordinatorKeys, out = sift(req.CoordinatorKeys, func(k *string) int16 { return c.groupCode(auth.OpDescribe, *k) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.FindCoordinatorResponse)
		for _, o := range out {
			co := kmsg.NewFindCoordinatorResponseCoordinator()
			co.Key, co.ErrorCode, co.NodeID, co.Port = o.item, o.code, -1, -1
			resp.Coordinators = append(resp.Coordinators, co)
		}
	}
}

func aclDescribeGroups(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DescribeGroupsRequest)
	var out []refused[string]
	req.Groups, out = sift(req.Groups, func(g *string) int16 { return c.groupCode(auth.OpDescribe, *g) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DescribeGroupsResponse)
		for _, o := range out {
			sg := kmsg.NewDescribeGroupsResponseGroup()
			sg.Group, sg.ErrorCode = o.item, o.code
			resp.Groups = append(resp.Groups, sg)
		}
	}
}

// aclListGroups: DESCRIBE on the cluster lists every group; otherwise the
// list holds the groups the principal may describe.
func aclListGroups(c *conn, _ kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if c.authorizeCluster(auth.OpDescribe) {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.ListGroupsResponse)
		resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
			return !c.authorize(auth.OpDescribe, auth.ResGroup, g.Group)
		})
	}
}

func aclDeleteGroups(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.DeleteGroupsRequest)
	var out []refused[string]
	req.Groups, out = sift(req.Groups, func(g *string) int16 { return c.groupCode(auth.OpDelete, *g) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.DeleteGroupsResponse)
		for _, o := range out {
			sg := kmsg.NewDeleteGroupsResponseGroup()
			sg.Group, sg.ErrorCode = o.item, o.code
			resp.Groups = append(resp.Groups, sg)
		}
	}
}

// aclOffsetDelete: DELETE on the group and READ on each topic.
func aclOffsetDelete(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.OffsetDeleteRequest)
	if code := c.groupCode(auth.OpDelete, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	var out []refused[kmsg.OffsetDeleteRequestTopic]
	req.Topics, out = sift(req.Topics, func(t *kmsg.OffsetDeleteRequestTopic) int16 { return c.topicCode(auth.OpRead, t.Topic) })
	if len(out) == 0 {
		return nil, nil
	}
	return nil, func(r kmsg.Response) {
		resp := r.(*kmsg.OffsetDeleteResponse)
		for _, o := range out {
			st := kmsg.NewOffsetDeleteResponseTopic()
			st.Topic = o.item.Topic
			for _, p := range o.item.Partitions {
				sp := kmsg.NewOffsetDeleteResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, o.code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
}
