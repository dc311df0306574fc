package kafkawire

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// handleAlterUserSCRAMCredentials manages SASL users as Kafka's admin
// clients do. The request carries salted passwords, salted by the client:
// the password never reaches korvet.
func handleAlterUserSCRAMCredentials(ctx context.Context, c *conn, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		store := c.s.opts.Auth
		type userChange struct {
			changes []scramChange
			code    int16
			msg     string
		}
		users := scramAlterUsers(req)
		byUser := make(map[string]*userChange, len(users))
		for _, u := range users {
			byUser[u] = &userChange{}
		}
		fail := func(uc *userChange, code int16, msg string) {
			if uc.code == 0 {
				uc.code, uc.msg = code, msg
			}
		}
		// Like Kafka, a user with any bad alteration gets none applied.
		add := func(name string, m auth.Mechanism, del bool, cred auth.Credential) *userChange {
			uc := byUser[name]
			switch {
			case auth.ValidUserName(name) != nil:
				fail(uc, kerr.UnacceptableCredential.Code, auth.ValidUserName(name).Error())
			case !m.Valid():
				fail(uc, kerr.UnsupportedSaslMechanism.Code, fmt.Sprintf("unknown SCRAM mechanism %d", m))
			}
			for _, ch := range uc.changes {
				if ch.m == m {
					fail(uc, kerr.DuplicateResource.Code, "a user credential cannot be altered twice in the same request")
				}
			}
			uc.changes = append(uc.changes, scramChange{m: m, del: del, cred: cred})
			return uc
		}
		for _, d := range req.Deletions {
			add(d.Name, auth.Mechanism(d.Mechanism), true, auth.Credential{})
		}
		for _, u := range req.Upsertions {
			m := auth.Mechanism(u.Mechanism)
			cred, err := auth.CredentialFromSalted(m, u.Salt, u.SaltedPassword, int(u.Iterations))
			uc := add(u.Name, m, false, cred)
			if err != nil && m.Valid() {
				fail(uc, kerr.UnacceptableCredential.Code, err.Error())
			}
		}
		for _, name := range users {
			uc := byUser[name]
			if uc.code == 0 {
				uc.code, uc.msg = c.applySCRAM(ctx, store, name, uc.changes)
			}
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode = name, uc.code
			if uc.msg != "" {
				r.ErrorMessage = kmsg.StringPtr(uc.msg)
			}
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
}

// scramAlterUsers lists the users an alteration names, once each, in
// order.
func scramAlterUsers(req *kmsg.AlterUserSCRAMCredentialsRequest) []string {
	var out []string
	seen := map[string]bool{}
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return out
}

// scramChange deletes or sets one credential of a user.
type scramChange struct {
	m    auth.Mechanism
	del  bool
	cred auth.Credential
}

// applySCRAM checks that every credential to delete exists, then applies
// the changes.
func (c *conn) applySCRAM(ctx context.Context, store *auth.Store, user string, changes []scramChange) (int16, string) {
	for _, ch := range changes {
		if !ch.del {
			continue
		}
		if _, ok, err := store.Credential(ctx, ch.m, user); err != nil {
			return kerr.UnknownServerError.Code, err.Error()
		} else if !ok {
			return kerr.ResourceNotFound.Code, fmt.Sprintf("no %s credential for user %s", ch.m, user)
		}
	}
	for _, ch := range changes {
		var err error
		if ch.del {
			_, err = store.DeleteCredential(ctx, ch.m, user)
		} else {
			err = store.SetCredential(ctx, ch.m, user, ch.cred)
		}
		if errors.Is(err, auth.ErrInvalidCredential) {
			return kerr.UnacceptableCredential.Code, err.Error()
		}
		if err != nil {
			c.s.log.Warn("alter SCRAM credential", "user", user, "mechanism", ch.m.String(), "err", err)
			return kerr.UnknownServerError.Code, err.Error()
		}
		c.s.log.Info("SCRAM credential changed", "user", user, "mechanism", ch.m.String(), "deleted", ch.del, "by", c.principal)
	}
	return 0, ""
}

// aclAlterUserSCRAMCredentials refuses all who may not manage users,
// whatever the ACLs say; handle applies it even with ACLs off.
func aclAlterUserSCRAMCredentials(c *conn, kr kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	if c.mayManageUsers() {
		return nil, nil
	}
	req := kr.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	for _, u := range scramAlterUsers(req) {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode, r.ErrorMessage = u, clusterDenied, kmsg.StringPtr(manageUsersDenied)
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
