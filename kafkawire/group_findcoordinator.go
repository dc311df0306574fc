package kafkawire

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// Coordinator key types of FindCoordinator.
const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

// handleFindCoordinator names the live broker that coordinates a group
// or a transactional id (engine.Coordinator and engine.TxnCoordinator: a
// hash over the live brokers, which every broker computes alike), at its
// address on this connection's listener.
func handleFindCoordinator(_ context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	return func() kmsg.Response {
		s := c.s
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		answer := func(key string) kmsg.FindCoordinatorResponseCoordinator {
			co := kmsg.NewFindCoordinatorResponseCoordinator()
			co.Key = key
			co.NodeID, co.Port = -1, -1
			var id int32
			what := "group"
			switch req.CoordinatorType {
			case coordinatorGroup:
				id = s.eng.Coordinator(key)
			case coordinatorTransaction:
				if key == "" {
					co.ErrorCode = kerr.InvalidRequest.Code
					co.ErrorMessage = nonEmpty("empty transactional id")
					return co
				}
				id, what = s.eng.TxnCoordinator(key), "transactional id"
			default:
				co.ErrorCode = kerr.InvalidRequest.Code
				co.ErrorMessage = nonEmpty("korvet coordinates groups (key type 0) and transactions (1) only")
				return co
			}
			b, live := s.eng.Broker(id)
			n, reachable := c.nodeOf(b)
			if live && reachable {
				co.NodeID, co.Host, co.Port = n.id, n.host, n.port
				return co
			}
			// Its lease is not seen yet, or it just went: the client
			// asks again shortly.
			co.ErrorCode = kerr.CoordinatorNotAvailable.Code
			co.ErrorMessage = nonEmpty(fmt.Sprintf("the coordinator of %s %q, broker %d, is not live", what, key, id))
			return co
		}
		if req.Version >= 4 {
			for _, k := range req.CoordinatorKeys {
				resp.Coordinators = append(resp.Coordinators, answer(k))
			}
			return resp
		}
		co := answer(req.CoordinatorKey)
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = co.NodeID, co.Host, co.Port, co.ErrorCode
		if req.Version >= 1 {
			resp.ErrorMessage = co.ErrorMessage
		}
		return resp
	}
}

// aclFindCoordinator: DESCRIBE on the group, or on the transactional id,
// to find its coordinator.
func aclFindCoordinator(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	req := kr.(*kmsg.FindCoordinatorRequest)
	var code func(key string) int16
	switch req.CoordinatorType {
	case coordinatorGroup:
		code = func(k string) int16 { return c.groupCode(auth.OpDescribe, k) }
	case coordinatorTransaction:
		code = func(k string) int16 { return c.txnIDCode(auth.OpDescribe, k) }
	default:
		return nil, nil // the handler refuses it
	}
	if req.Version < 4 {
		cd := code(req.CoordinatorKey)
		if cd == 0 {
			return nil, nil
		}
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID, resp.Port = cd, -1, -1
		return resp, nil
	}
	var out []refused[string]
	req.CoordinatorKeys, out = sift(req.CoordinatorKeys, func(k *string) int16 { return code(*k) })
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
