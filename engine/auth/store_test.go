package auth

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// TestDecoySaltStable: the decoy salt of an unknown user comes from a
// seed kept in Redis, so two stores on the same Redis (two korvets, or
// one restarted) answer with the same salt; other names and mechanisms
// get other salts, and another Redis another seed.
func TestDecoySaltStable(t *testing.T) {
	rd := testbed.StartRedis(t)
	open := func(url string) *Store {
		t.Helper()
		rc, err := resp.New(url, resp.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rc.Close() })
		s, err := Open(context.Background(), rc, Options{Keyspace: "t", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// serverSalt is the s= of the server-first message for user.
	serverSalt := func(s *Store, m Mechanism, user string) string {
		t.Helper()
		out, _, err := s.NewScram(m).Step(ctx(t), []byte("n,,n="+user+",r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(string(out), ",s=")
		salt, _, _ := strings.Cut(rest, ",")
		return salt
	}
	a, b := open(rd.URL), open(rd.URL)
	for _, m := range Mechanisms {
		sa, sb := serverSalt(a, m, "ghost"), serverSalt(b, m, "ghost")
		if sa == "" || sa != sb {
			t.Errorf("%s: decoy salt of ghost %q from one store, %q from another on the same Redis", m, sa, sb)
		}
		if !bytes.Equal(a.decoy(m, "ghost").Salt, b.decoy(m, "ghost").Salt) {
			t.Errorf("%s: decoy credentials differ between stores", m)
		}
		if other := serverSalt(b, m, "phantom"); other == sa {
			t.Errorf("%s: ghost and phantom share the decoy salt %q", m, sa)
		}
	}
	if serverSalt(a, ScramSHA256, "ghost") == serverSalt(a, ScramSHA512, "ghost") {
		t.Error("the decoy salt is the same for both mechanisms")
	}
	// Restarting Redis (AOF on) keeps the seed.
	before := serverSalt(a, ScramSHA256, "ghost")
	rd.Restart(t)
	if after := serverSalt(open(rd.URL), ScramSHA256, "ghost"); after != before {
		t.Errorf("decoy salt %q after a Redis restart, %q before", after, before)
	}
	// Another Redis makes its own seed.
	if other := serverSalt(open(testbed.StartRedis(t).URL), ScramSHA256, "ghost"); other == before {
		t.Error("two Redis servers gave the same decoy salt: the seed is not random")
	}

	// A damaged seed is reported, not used.
	rc, err := resp.New(rd.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := rc.Do(ctx(t), "HSET", "t:meta:cluster", decoySeedField, "not hex"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx(t), rc, Options{Keyspace: "t"}); err == nil || !strings.Contains(err.Error(), decoySeedField) {
		t.Errorf("open with a damaged seed: %v, want an error naming %s", err, decoySeedField)
	}
}
