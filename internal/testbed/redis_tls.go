package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TLSRedis is a redis-server that listens with TLS only.
type TLSRedis struct {
	Addr     string         // 127.0.0.1:PORT
	Pool     *x509.CertPool // verifies its certificate
	CAFile   string         // the CA, PEM
	CertFile string         // its certificate for 127.0.0.1, PEM; also good as a client certificate
	KeyFile  string         // that certificate's key, PEM
}

// testCA makes a CA and a server certificate for 127.0.0.1 signed by it,
// written as PEM files into dir.
func testCA(t testing.TB, dir string) (pool *x509.CertPool, certFile, keyFile, caFile string) {
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

// StartTLSRedis starts redis-server listening with TLS only, on a free
// loopback port, with a test CA made for it; clientCerts makes it ask
// clients for a certificate signed by that CA (tls-auth-clients yes).
// It is killed when the test ends.
func StartTLSRedis(t testing.TB, clientCerts bool, extra ...string) *TLSRedis {
	t.Helper()
	bin, err := lookRedis()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pool, cert, key, ca := testCA(t, dir)
	port := FreePort(t)
	authClients := "no"
	if clientCerts {
		authClients = "yes"
	}
	args := append([]string{"--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", authClients,
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
	if clientCerts {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		conf.Certificates = []tls.Certificate{c}
	}
	WaitFor(t, 10*time.Second, "redis-server serving TLS on "+addr, func() bool {
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
	return &TLSRedis{Addr: addr, Pool: pool, CAFile: ca, CertFile: cert, KeyFile: key}
}
