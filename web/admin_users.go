package web

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"net/http"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine/auth"
)

// User routes: SCRAM credentials, through DescribeUserScramCredentials and
// AlterUserScramCredentials (super users only, as kafkawire enforces). The
// password is salted here, with a fresh random salt, as a Kafka admin
// client salts it: it is in the request body only, never stored, logged
// or answered.

type userJSON struct {
	Name       string          `json:"name"`
	Mechanisms []mechanismJSON `json:"mechanisms"`
}

type mechanismJSON struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func (s *server) usersList(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	users, err := s.describeUsers(ctx, r, nil)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": users})
}

// describeUsers describes the named users (all when names is nil).
func (s *server) describeUsers(ctx context.Context, r *http.Request, names []string) ([]userJSON, error) {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, n := range names {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = n
		req.Users = append(req.Users, u)
	}
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return nil, err
	}
	resp := kr.(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if err := kafkaError(resp.ErrorCode, resp.ErrorMessage, "describe users"); err != nil {
		return nil, err
	}
	out := []userJSON{}
	for _, u := range resp.Results {
		if err := kafkaError(u.ErrorCode, u.ErrorMessage, "describe user "+u.User); err != nil {
			return nil, err
		}
		uj := userJSON{Name: u.User, Mechanisms: []mechanismJSON{}}
		for _, c := range u.CredentialInfos {
			uj.Mechanisms = append(uj.Mechanisms, mechanismJSON{Mechanism: auth.Mechanism(c.Mechanism).String(), Iterations: c.Iterations})
		}
		out = append(out, uj)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type userSetBody struct {
	Mechanism  string `json:"mechanism"`  // default SCRAM-SHA-256
	Password   string `json:"password"`   // never logged
	Iterations int32  `json:"iterations"` // default 8192
}

func (s *server) userSet(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var b userSetBody
	err := decodeBody(w, r, &b)
	var out map[string]any
	if err == nil {
		ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
		defer cancel()
		out, err = s.setUser(ctx, r, name, b)
	}
	s.finish(w, r, "user.set", "user:"+name, http.StatusOK, out, err)
}

func (s *server) setUser(ctx context.Context, r *http.Request, name string, b userSetBody) (map[string]any, error) {
	m := auth.ScramSHA256
	if b.Mechanism != "" {
		var ok bool
		if m, ok = auth.ParseMechanism(b.Mechanism); !ok {
			return nil, invalid(fmt.Sprintf("field mechanism: %q is not SCRAM-SHA-256 or SCRAM-SHA-512", b.Mechanism))
		}
	}
	if b.Password == "" {
		return nil, invalid("field password: the new password is missing")
	}
	iter := b.Iterations
	if iter == 0 {
		iter = auth.DefaultIterations
	}
	if iter < auth.MinIterations || iter > auth.MaxIterations {
		return nil, invalid(fmt.Sprintf("field iterations: %d is not from %d to %d", iter, auth.MinIterations, auth.MaxIterations))
	}
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return nil, fmt.Errorf("salt: %w", err)
	}
	h, size := sha256.New, sha256.Size
	if m == auth.ScramSHA512 {
		h, size = sha512.New, sha512.Size
	}
	salted, err := pbkdf2.Key(func() hash.Hash { return h() }, b.Password, salt, int(iter), size)
	if err != nil {
		return nil, fmt.Errorf("salt password: %w", err)
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, int8(m), iter, salt, salted
	req.Upsertions = append(req.Upsertions, u)
	if err := s.alterUsers(ctx, r, req); err != nil {
		return nil, err
	}
	return map[string]any{"name": name, "mechanism": m.String(), "iterations": iter}, nil
}

func (s *server) alterUsers(ctx context.Context, r *http.Request, req *kmsg.AlterUserSCRAMCredentialsRequest) error {
	kr, err := s.kafka(ctx, r, req)
	if err != nil {
		return err
	}
	for _, res := range kr.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		if err := kafkaError(res.ErrorCode, res.ErrorMessage, "change user "+res.User); err != nil {
			return err
		}
	}
	return nil
}

func (s *server) userDelete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	out, err := s.deleteUser(ctx, r, name, r.URL.Query().Get("mechanism"))
	s.finish(w, r, "user.delete", "user:"+name, http.StatusOK, out, err)
}

func (s *server) deleteUser(ctx context.Context, r *http.Request, name, mech string) (map[string]any, error) {
	var ms []auth.Mechanism
	if mech != "" {
		m, ok := auth.ParseMechanism(mech)
		if !ok {
			return nil, invalid(fmt.Sprintf("query parameter mechanism: %q is not SCRAM-SHA-256 or SCRAM-SHA-512", mech))
		}
		ms = []auth.Mechanism{m}
	} else {
		// All the user has: deleting one it lacks is an error.
		users, err := s.describeUsers(ctx, r, []string{name})
		if err != nil {
			return nil, err
		}
		for _, u := range users {
			for _, c := range u.Mechanisms {
				if m, ok := auth.ParseMechanism(c.Mechanism); ok {
					ms = append(ms, m)
				}
			}
		}
		if len(ms) == 0 {
			return nil, &apiError{status: http.StatusNotFound, code: "resource_not_found", msg: "user " + name + " has no SCRAM credentials"}
		}
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	deleted := []string{}
	for _, m := range ms {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, int8(m)
		req.Deletions = append(req.Deletions, d)
		deleted = append(deleted, m.String())
	}
	if err := s.alterUsers(ctx, r, req); err != nil {
		return nil, err
	}
	return map[string]any{"deleted": name, "mechanisms": deleted}, nil
}
