package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

func openStore(t *testing.T) (*Store, *resp.Client) {
	t.Helper()
	rd := testbed.StartRedis(t)
	rc, err := resp.New(rd.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	s, err := Open(context.Background(), rc, Options{Keyspace: "t", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s, rc
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestScramRFC7677 replays the SCRAM-SHA-256 example exchange of RFC 7677
// section 3 against the server side.
func TestScramRFC7677(t *testing.T) {
	s, _ := openStore(t)
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := saltPassword(ScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := CredentialFromSalted(ScramSHA256, salt, salted, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetCredential(ctx(t), ScramSHA256, "user", cred); err != nil {
		t.Fatal(err)
	}
	sc := s.NewScram(ScramSHA256)
	sc.serverNonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	out, done, err := sc.Step(ctx(t), []byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatalf("client-first: %v, done %v", err, done)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(out) != want {
		t.Fatalf("server-first = %q, want %q", out, want)
	}
	out, done, err = sc.Step(ctx(t), []byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("client-final: %v, done %v", err, done)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(out) != want {
		t.Fatalf("server-final = %q, want %q", out, want)
	}
	if sc.User() != "user" {
		t.Errorf("user = %q", sc.User())
	}
}

// exchange runs franz-go's SCRAM client against the server side in
// memory.
func exchange(t *testing.T, s *Store, m Mechanism, a scram.Auth) error {
	t.Helper()
	mech := a.AsSha256Mechanism()
	if m == ScramSHA512 {
		mech = a.AsSha512Mechanism()
	}
	sess, msg, err := mech.Authenticate(ctx(t), "korvet")
	if err != nil {
		t.Fatal(err)
	}
	sc := s.NewScram(m)
	for {
		out, done, err := sc.Step(ctx(t), msg)
		if err != nil {
			return err
		}
		cdone, next, err := sess.Challenge(out)
		if err != nil {
			t.Fatalf("client rejected the server: %v", err)
		}
		if done {
			if !cdone || sc.User() != a.User {
				t.Fatalf("server done, client done %v, user %q", cdone, sc.User())
			}
			return nil
		}
		msg = next
	}
}

func TestScramWithFranzClient(t *testing.T) {
	s, _ := openStore(t)
	for _, m := range Mechanisms {
		t.Run(m.String(), func(t *testing.T) {
			user := "ada,=lovelace" // needs RFC 5802 escaping
			c, err := NewCredential(m, "s3cret pässword", MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetCredential(ctx(t), m, user, c); err != nil {
				t.Fatal(err)
			}
			if err := exchange(t, s, m, scram.Auth{User: user, Pass: "s3cret pässword"}); err != nil {
				t.Fatalf("right password: %v", err)
			}
			if err := exchange(t, s, m, scram.Auth{User: user, Pass: "wrong"}); !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("wrong password: %v, want ErrAuthFailed", err)
			}
			if err := exchange(t, s, m, scram.Auth{User: "nobody", Pass: "x"}); !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("unknown user: %v, want ErrAuthFailed", err)
			}
			if err := exchange(t, s, m, scram.Auth{User: user, Pass: "s3cret pässword", Zid: "someone-else"}); !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("foreign authzid: %v, want ErrAuthFailed", err)
			}
			if err := exchange(t, s, m, scram.Auth{User: user, Pass: "s3cret pässword", IsToken: true}); !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("token auth: %v, want ErrAuthFailed", err)
			}
		})
	}
}

func TestScramMalformed(t *testing.T) {
	s, _ := openStore(t)
	for _, msg := range []string{"", "n", "p=tls-unique,,n=a,r=x", "n,,r=x,n=a", "n,,n=a", "n,,n=a=zz,r=x", "x,,n=a,r=x", "n,,m=1,n=a,r=x", "n,,n=a,r=b,c"} {
		if _, _, err := s.NewScram(ScramSHA256).Step(ctx(t), []byte(msg)); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("client-first %q: %v, want ErrAuthFailed", msg, err)
		}
	}
	sc := s.NewScram(ScramSHA256)
	if _, _, err := sc.Step(ctx(t), []byte("n,,n=a,r=abc")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sc.Step(ctx(t), []byte("c=biws,r=abc,p=AAAA")); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("wrong nonce: %v", err)
	}
}

func TestCredentials(t *testing.T) {
	s, _ := openStore(t)
	c := ctx(t)
	if _, err := NewCredential(ScramSHA256, "pw", 100); !errors.Is(err, ErrInvalidCredential) {
		t.Errorf("100 iterations: %v", err)
	}
	if _, err := NewCredential(ScramSHA256, "", MinIterations); !errors.Is(err, ErrInvalidCredential) {
		t.Errorf("empty password: %v", err)
	}
	for _, m := range Mechanisms {
		cr, err := NewCredential(m, "pw-"+m.String(), MinIterations+int(m))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetCredential(c, m, "bob", cr); err != nil {
			t.Fatal(err)
		}
	}
	cr, _ := NewCredential(ScramSHA256, "alice-pw", MinIterations)
	if err := s.SetCredential(c, ScramSHA256, "alice", cr); err != nil {
		t.Fatal(err)
	}
	users, err := s.Users(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 || users[0].Name != "alice" || users[1].Name != "bob" || len(users[1].Mechanisms) != 2 ||
		users[1].Mechanisms[1] != (MechanismInfo{ScramSHA512, MinIterations + 2}) {
		t.Fatalf("users = %+v", users)
	}
	// PLAIN checks the SHA-512 credential when there is one.
	if err := s.CheckPassword(c, "bob", "pw-SCRAM-SHA-512"); err != nil {
		t.Errorf("bob/512: %v", err)
	}
	if err := s.CheckPassword(c, "bob", "pw-SCRAM-SHA-256"); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("bob/256 password: %v", err)
	}
	if err := s.CheckPassword(c, "alice", "alice-pw"); err != nil {
		t.Errorf("alice: %v", err)
	}
	if err := s.CheckPassword(c, "carol", "x"); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("unknown user: %v", err)
	}
	if ok, err := s.DeleteCredential(c, ScramSHA512, "bob"); !ok || err != nil {
		t.Errorf("delete: %v %v", ok, err)
	}
	if ok, err := s.DeleteCredential(c, ScramSHA512, "bob"); ok || err != nil {
		t.Errorf("delete again: %v %v", ok, err)
	}
	if err := s.CheckPassword(c, "bob", "pw-SCRAM-SHA-256"); err != nil {
		t.Errorf("bob falls back to 256: %v", err)
	}
	if err := s.SetCredential(c, ScramSHA256, "", cr); !errors.Is(err, ErrInvalidCredential) {
		t.Errorf("empty user: %v", err)
	}
}

func strp(s string) *string { return &s }

func TestAuthorize(t *testing.T) {
	s, rc := openStore(t)
	c := ctx(t)
	acl := func(perm Permission, op Operation, rt ResourceType, pat PatternType, res, principal string) ACL {
		return ACL{Principal: principal, Host: "*", ResourceType: rt, Pattern: pat, Resource: res, Operation: op, Permission: perm}
	}
	acls := []ACL{
		acl(PermAllow, OpWrite, ResTopic, PatternLiteral, "orders", "User:alice"),
		acl(PermAllow, OpRead, ResTopic, PatternPrefixed, "ord", "User:alice"),
		acl(PermDeny, OpRead, ResTopic, PatternLiteral, "ord-secret", "User:alice"),
		acl(PermAllow, OpAll, ResGroup, PatternLiteral, "*", "User:*"),
		acl(PermDeny, OpAll, ResGroup, PatternPrefixed, "admin-", "User:*"),
		acl(PermAllow, OpAlterConfigs, ResTopic, PatternLiteral, "cfg", "User:bob"),
		{Principal: "User:carol", Host: "10.0.0.1", ResourceType: ResTopic, Pattern: PatternLiteral, Resource: "orders", Operation: OpRead, Permission: PermAllow},
	}
	for _, a := range acls {
		if err := a.Validate(); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	if err := s.CreateACLs(c, append(acls, acls[0])); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		principal, host string
		op              Operation
		rt              ResourceType
		name            string
		want            bool
	}{
		{"User:alice", "1.2.3.4", OpWrite, ResTopic, "orders", true},
		{"User:alice", "1.2.3.4", OpDescribe, ResTopic, "orders", true}, // WRITE implies DESCRIBE
		{"User:alice", "1.2.3.4", OpWrite, ResTopic, "orders2", false},
		{"User:alice", "1.2.3.4", OpRead, ResTopic, "orders2", true}, // prefixed
		{"User:alice", "1.2.3.4", OpRead, ResTopic, "ord-secret", false},
		{"User:alice", "1.2.3.4", OpDescribe, ResTopic, "ord-secret", true}, // deny READ does not deny DESCRIBE
		{"User:alice", "1.2.3.4", OpDelete, ResTopic, "orders", false},
		{"User:bob", "1.2.3.4", OpRead, ResTopic, "orders", false},
		{"User:bob", "1.2.3.4", OpRead, ResGroup, "g1", true}, // User:* ALL on literal *
		{"User:bob", "1.2.3.4", OpRead, ResGroup, "admin-x", false},
		{"User:bob", "1.2.3.4", OpDescribeConfigs, ResTopic, "cfg", true},
		{"User:bob", "1.2.3.4", OpAlter, ResTopic, "cfg", false},
		{"User:carol", "10.0.0.1", OpRead, ResTopic, "orders", true},
		{"User:carol", "10.0.0.2", OpRead, ResTopic, "orders", false},
		{"User:alice", "1.2.3.4", OpCreate, ResCluster, ClusterName, false},
	}
	for _, tt := range tests {
		if got := s.Authorize(tt.principal, tt.host, tt.op, tt.rt, tt.name); got != tt.want {
			t.Errorf("Authorize(%s, %s, %s, %s %q) = %v, want %v", tt.principal, tt.host, tt.op, tt.rt, tt.name, got, tt.want)
		}
	}
	if !s.AuthorizeAny("User:alice", "1.2.3.4", OpWrite, ResTopic) || s.AuthorizeAny("User:bob", "1.2.3.4", OpWrite, ResTopic) {
		t.Error("AuthorizeAny WRITE on topics: want alice yes, bob no")
	}

	// Match finds every ACL that applies to a name.
	got := s.ACLs(Filter{ResourceType: ResTopic, Pattern: PatternMatch, Resource: strp("ord-secret"), Operation: OpAny, Permission: PermAny})
	if len(got) != 2 {
		t.Errorf("match ord-secret: %v", got)
	}
	got = s.ACLs(Filter{ResourceType: ResAny, Pattern: PatternAny, Principal: strp("User:*"), Operation: OpAny, Permission: PermAny})
	if len(got) != 2 {
		t.Errorf("User:* ACLs: %v", got)
	}

	// They survive a reload from Redis, and deletion removes them there.
	s2, err := Open(c, rc, Options{Keyspace: "t", Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s2.ACLs(Filter{ResourceType: ResAny, Pattern: PatternAny, Operation: OpAny, Permission: PermAny})); n != len(acls) {
		t.Fatalf("reloaded %d ACLs, want %d", n, len(acls))
	}
	del, err := s2.DeleteACLs(c, []Filter{{ResourceType: ResGroup, Pattern: PatternAny, Operation: OpAny, Permission: PermAny}, {ResourceType: ResTopic, Pattern: PatternLiteral, Resource: strp("orders"), Operation: OpWrite, Permission: PermAllow}})
	if err != nil {
		t.Fatal(err)
	}
	if len(del[0]) != 2 || len(del[1]) != 1 {
		t.Fatalf("deleted %v", del)
	}
	s3, err := Open(c, rc, Options{Keyspace: "t", Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s3.ACLs(Filter{ResourceType: ResAny, Pattern: PatternAny, Operation: OpAny, Permission: PermAny})); n != len(acls)-3 {
		t.Fatalf("after delete, %d ACLs in Redis, want %d", n, len(acls)-3)
	}
	if s3.Authorize("User:alice", "1.2.3.4", OpWrite, ResTopic, "orders") {
		t.Error("deleted ACL still applies")
	}
}

func TestACLValidate(t *testing.T) {
	ok := ACL{Principal: "User:a", Host: "*", ResourceType: ResTopic, Pattern: PatternLiteral, Resource: "t", Operation: OpRead, Permission: PermAllow}
	bad := []func(*ACL){
		func(a *ACL) { a.Principal = "Group:a" },
		func(a *ACL) { a.Principal = "User:" },
		func(a *ACL) { a.Host = "example.com" },
		func(a *ACL) { a.ResourceType = ResDelegationToken },
		func(a *ACL) { a.Pattern = PatternMatch },
		func(a *ACL) { a.Pattern = PatternPrefixed; a.Resource = "*" },
		func(a *ACL) { a.Resource = "" },
		func(a *ACL) { a.ResourceType = ResCluster },
		func(a *ACL) { a.Operation = OpAny },
		func(a *ACL) { a.Permission = PermAny },
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	txnID := ok
	txnID.ResourceType, txnID.Operation = ResTransactionalID, OpWrite
	if err := txnID.Validate(); err != nil {
		t.Errorf("an ACL on a transactional id: %v", err)
	}
	for i, f := range bad {
		a := ok
		f(&a)
		if err := a.Validate(); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("case %d (%s): %v, want ErrInvalidACL", i, a, err)
		}
	}
}
