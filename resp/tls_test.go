package resp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// testCA makes a CA and a server certificate for 127.0.0.1 signed by it,
// written as PEM files into dir.
func testCA(t *testing.T, dir string) (pool *x509.CertPool, certFile, keyFile, caFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "korvet test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "redis"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return pool, write("redis.crt", "CERTIFICATE", der), write("redis.key", "EC PRIVATE KEY", keyDER), write("ca.crt", "CERTIFICATE", caDER)
}

// startTLSRedis starts redis-server listening with TLS only, and returns
// its address and the CA pool that verifies it.
func startTLSRedis(t *testing.T, extra ...string) (string, *x509.CertPool) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	dir := t.TempDir()
	pool, cert, key, ca := testCA(t, dir)
	port := testbed.FreePort(t)
	args := append([]string{"--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir}, extra...)
	logf, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	conf := &tls.Config{RootCAs: pool}
	testbed.WaitFor(t, 10*time.Second, "redis-server serving TLS on "+addr, func() bool {
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server exited:\n%s", b)
		default:
		}
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, conf)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return addr, pool
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
