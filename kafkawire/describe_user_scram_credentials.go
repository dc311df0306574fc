package kafkawire

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleDescribeUserSCRAMCredentials lists SASL users and their
// mechanisms, as Kafka's admin clients do.
func handleDescribeUserSCRAMCredentials(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
		users, err := c.s.opts.Auth.Users(ctx)
		if err != nil {
			c.s.log.Warn("describe SCRAM users", "err", err)
			resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, errMsg(err)
			return resp
		}
		result := func(u auth.User) kmsg.DescribeUserSCRAMCredentialsResponseResult {
			r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.User = u.Name
			for _, m := range u.Mechanisms {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = int8(m.Mechanism), int32(m.Iterations)
				r.CredentialInfos = append(r.CredentialInfos, ci)
			}
			return r
		}
		if len(req.Users) == 0 {
			for _, u := range users {
				resp.Results = append(resp.Results, result(u))
			}
			return resp
		}
		byName := make(map[string]auth.User, len(users))
		for _, u := range users {
			byName[u.Name] = u
		}
		asked := map[string]int{}
		for _, ru := range req.Users {
			asked[ru.Name]++
		}
		for _, ru := range req.Users {
			u, ok := byName[ru.Name]
			r := result(u)
			r.User = ru.Name
			switch {
			case asked[ru.Name] > 1:
				r.ErrorCode = kerr.DuplicateResource.Code
				r.ErrorMessage = kmsg.StringPtr("user named more than once")
				r.CredentialInfos = nil
			case !ok:
				r.ErrorCode = kerr.ResourceNotFound.Code
				r.ErrorMessage = kmsg.StringPtr("no SCRAM credential for user " + ru.Name)
			}
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
}

// aclDescribeUserSCRAMCredentials refuses all who may not manage users,
// whatever the ACLs say; handle applies it even with ACLs off.
func aclDescribeUserSCRAMCredentials(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if c.mayManageUsers() {
		return nil, nil
	}
	req := kr.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.ErrorCode, resp.ErrorMessage = clusterDenied, kmsg.StringPtr(manageUsersDenied)
	return resp, nil
}
