package web

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// fakePasswords knows one user and counts the checks that reach it.
type fakePasswords struct {
	user, password string
	gen            atomic.Uint64
	checks         atomic.Int64
}

func (f *fakePasswords) CheckPassword(_ context.Context, user, password string) error {
	f.checks.Add(1)
	if user == f.user && password == f.password {
		return nil
	}
	return errors.New("invalid credentials")
}

func (f *fakePasswords) CredentialGeneration() uint64 { return f.gen.Load() }

// TestLoginCacheForgetsChangedCredentials: a cached login is trusted only
// while the credentials are unchanged, so a deleted user or a changed
// password stops working at the next request, not when the entry expires.
func TestLoginCacheForgetsChangedCredentials(t *testing.T) {
	ctx := context.Background()
	c := newLoginCache()
	pw := &fakePasswords{user: "alice", password: "s3cret"}
	for i := range 2 {
		if !c.check(ctx, pw, "alice", "s3cret") {
			t.Fatalf("login %d: a right password was refused", i+1)
		}
	}
	if n := pw.checks.Load(); n != 1 {
		t.Fatalf("%d password checks for two logins, want 1 (the second from the cache)", n)
	}
	// The password changes (as DELETE or PUT /api/v1/users would).
	pw.password = "new"
	pw.gen.Add(1)
	if c.check(ctx, pw, "alice", "s3cret") {
		t.Fatal("the old password still logs in after the credentials changed")
	}
	if !c.check(ctx, pw, "alice", "new") {
		t.Fatal("the new password was refused")
	}
	if c.check(ctx, pw, "alice", "") || c.check(ctx, pw, "", "new") {
		t.Fatal("an empty user or password logged in")
	}
}
