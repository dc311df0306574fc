package resp_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// startTLSRedis starts a TLS-only redis-server (no client certificates)
// and returns its address and the CA pool that verifies it.
func startTLSRedis(t *testing.T, extra ...string) (string, *x509.CertPool) {
	t.Helper()
	r := testbed.StartTLSRedis(t, false, extra...)
	return r.Addr, r.Pool
}

func TestTLS(t *testing.T) {
	addr, pool := startTLSRedis(t, "--requirepass", "tls-secret")
	ctx := ctxT(t)
	url := "rediss://:tls-secret@" + addr + "/0"

	c := newClient(t, url, resp.Options{TLS: &tls.Config{RootCAs: pool}})
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	mustDo(t, c, "SET", "k", "over tls")
	if r := mustDo(t, c, "GET", "k"); string(r.Bytes()) != "over tls" {
		t.Fatalf("GET: %q", r.Raw)
	}

	// Skip-verify is the caller's choice.
	c2 := newClient(t, url, resp.Options{TLS: &tls.Config{InsecureSkipVerify: true}})
	if err := c2.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	// The system roots do not know the test CA: a clear error, no hang,
	// no password in it.
	c3 := newClient(t, url, resp.Options{DialTimeout: 2 * time.Second})
	err := c3.Ping(ctx)
	var ue x509.UnknownAuthorityError
	if !errors.As(err, &ue) || !resp.IsConnError(err) || strings.Contains(err.Error(), "tls-secret") {
		t.Fatalf("Ping with the system roots: %v", err)
	}
	t.Log(err)

	// The wrong name fails verification too.
	c4 := newClient(t, url, resp.Options{TLS: &tls.Config{RootCAs: pool, ServerName: "other.example"}})
	if err := c4.Ping(ctx); err == nil || !resp.IsConnError(err) {
		t.Fatalf("Ping with a wrong server name: %v", err)
	}

	// Plain RESP to a TLS port fails within the timeout, not later.
	c5 := newClient(t, "redis://:tls-secret@"+addr+"/0", resp.Options{DialTimeout: time.Second})
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c5.Ping(pctx); err == nil {
		t.Fatal("plain Ping to a TLS port succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("plain Ping to a TLS port took %v", d)
	}
}
