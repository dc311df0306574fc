package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// TestUserCommand runs `korvet user add/list/delete` in process against a
// real Redis and checks what lands there.
func TestUserCommand(t *testing.T) {
	r := testbed.StartRedis(t)
	cfg := writeConfig(t, fmt.Sprintf("[redis]\nurl = %q\nkeyspace = \"kv1\"\n", r.URL))
	user := func(stdin string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := runUser(args, strings.NewReader(stdin), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, out, errOut := user("s3cret pw\n", "add", "--config", cfg, "alice"); code != 0 || !strings.Contains(out, "SCRAM-SHA-512") {
		t.Fatalf("add alice: %d %q %q", code, out, errOut)
	}
	// Flags after the name; one mechanism; CRLF line ending.
	if code, _, errOut := user("bob-pw\r\n", "add", "bob", "--config", cfg, "--mechanism", "SCRAM-SHA-256", "--iterations", "4096"); code != 0 {
		t.Fatalf("add bob: %d %q", code, errOut)
	}
	code, out, _ := user("", "list", "--config", cfg)
	want := "alice\tSCRAM-SHA-256 (8192 iterations), SCRAM-SHA-512 (8192 iterations)\nbob\tSCRAM-SHA-256 (4096 iterations)\n"
	if code != 0 || out != want {
		t.Errorf("list = %d %q, want %q", code, out, want)
	}

	// What is in Redis checks out, and holds no password.
	rc, err := resp.New(r.URL, resp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx := context.Background()
	store, err := auth.Open(ctx, rc, auth.Options{Keyspace: "kv1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.CheckPassword(ctx, "alice", "s3cret pw"); err != nil {
		t.Errorf("alice's password: %v", err)
	}
	if err := store.CheckPassword(ctx, "bob", "bob-pw"); err != nil {
		t.Errorf("bob's password (CR stripped): %v", err)
	}
	raw, err := rc.Do(ctx, "HGET", "kv1:meta:scram:SCRAM-SHA-256", "alice")
	if err != nil || bytes.Contains(raw.Bytes(), []byte("s3cret")) || !bytes.Contains(raw.Bytes(), []byte(`"stored_key"`)) {
		t.Errorf("stored credential %q, %v", raw.Bytes(), err)
	}

	if code, _, errOut := user("", "delete", "--config", cfg, "--mechanism", "SCRAM-SHA-512", "alice"); code != 0 {
		t.Errorf("delete alice 512: %d %q", code, errOut)
	}
	if code, _, errOut := user("", "delete", "--config", cfg, "alice"); code != 0 {
		t.Errorf("delete alice: %d %q", code, errOut)
	}
	if code, _, errOut := user("", "delete", "--config", cfg, "alice"); code != 1 || !strings.Contains(errOut, "alice") {
		t.Errorf("delete alice again: %d %q, want 1 naming alice", code, errOut)
	}
	if code, out, _ := user("", "list", "--config", cfg); code != 0 || out != "bob\tSCRAM-SHA-256 (4096 iterations)\n" {
		t.Errorf("list after delete = %d %q", code, out)
	}

	for _, tc := range []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"", []string{}, 2, "usage"},
		{"", []string{"rename"}, 2, "usage"},
		{"pw\n", []string{"add", "--config", cfg}, 2, "usage"},
		{"pw\n", []string{"add", "--config", cfg, "a", "b"}, 2, "usage"},
		{"\n", []string{"add", "--config", cfg, "carol"}, 1, "empty password"},
		{"", []string{"add", "--config", cfg, "carol"}, 1, "empty password"},
		{"pw\n", []string{"add", "--config", cfg, "--mechanism", "MD5", "carol"}, 2, "MD5"},
		{"pw\n", []string{"add", "--config", cfg, "--iterations", "10", "carol"}, 1, "iterations"},
		{"pw\n", []string{"add", "--config", cfg, "--password", "x", "carol"}, 2, "password"},
		{"pw\n", []string{"add", "--config", filepath.Join(t.TempDir(), "none.toml"), "carol"}, 1, "none.toml"},
	} {
		code, _, errOut := user(tc.stdin, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("korvet user %v: exit %d, stderr %q; want %d mentioning %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// TestBinarySecurity runs the binary with a SASL plain listener and a
// SASL TLS listener, ACLs on, and users made with `korvet user add`.
func TestBinarySecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := korvetBinary(t)
	r := testbed.StartRedis(t)
	dir := t.TempDir()
	cert, key, roots := selfSigned(t, dir)
	plainAddr := fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t))
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", testbed.FreePort(t))
	cfg := writeConfig(t, fmt.Sprintf(`data_dir = %q
schema_registry.listen = "127.0.0.1:0"
[kafka]
listen = %q
auth = "sasl"
acls = true
super_users = ["User:admin"]
[kafka.tls]
listen = %q
auth = "sasl"
cert_file = %q
key_file = %q
[http]
listen = "127.0.0.1:%d"
[redis]
url = %q
`, dir, plainAddr, tlsAddr, cert, key, testbed.FreePort(t), r.URL))

	korvet := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("korvet %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	korvet("admin-password\n", "user", "add", "--config", cfg, "admin")
	korvet("alice-password\n", "user", "add", "alice", "--config", cfg, "--mechanism", "SCRAM-SHA-512")
	if out := korvet("", "user", "list", "--config", cfg); !strings.Contains(out, "admin\t") || !strings.Contains(out, "alice\tSCRAM-SHA-512") {
		t.Fatalf("user list:\n%s", out)
	}

	logs := &syncBuffer{}
	cmd := exec.Command(bin, "serve", "--config", cfg)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("korvet log:\n%s", logs.String())
		}
	})
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), "korvet started"); {
		if time.Now().After(deadline) {
			t.Fatal("korvet did not start within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(addr string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(1)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	tlsOpt := kgo.DialTLSConfig(&tls.Config{RootCAs: roots})
	admin := kadm.NewClient(client(plainAddr, kgo.SASL(scram.Auth{User: "admin", Pass: "admin-password"}.AsSha256Mechanism())))
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "ledger"); err != nil {
		t.Fatal(err)
	}
	res, err := admin.CreateACLs(ctx, kadm.NewACLs().Topics("ledger").Allow("User:alice").Operations(kadm.OpWrite, kadm.OpRead))
	if err != nil || res[0].Err != nil {
		t.Fatalf("create ACLs: %v %+v", err, res)
	}

	alice := client(tlsAddr, tlsOpt, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-password"}.AsSha512Mechanism()), kgo.DisableIdempotentWrite(), kgo.ConsumeTopics("ledger"))
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "ledger", Value: []byte("entry")}).FirstErr(); err != nil {
		t.Fatalf("alice produce over TLS: %v", err)
	}
	if fs := alice.PollFetches(ctx); fs.NumRecords() != 1 {
		t.Fatalf("alice fetched %d records: %v", fs.NumRecords(), fs.Errors())
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, alice)
	if err != nil || len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, fmt.Sprint(md.Brokers[0].Port)) != tlsAddr {
		t.Errorf("metadata over TLS advertises %+v (%v), want %s", md.Brokers, err, tlsAddr)
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "other", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice produce to other: %v", err)
	}
	// PLAIN is not among the default mechanisms.
	pl := client(tlsAddr, tlsOpt, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-password"}.AsMechanism()))
	if err := pl.Ping(ctx); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Errorf("PLAIN: %v", err)
	}

	korvet("", "user", "delete", "--config", cfg, "alice")
	gone := client(tlsAddr, tlsOpt, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-password"}.AsSha512Mechanism()))
	if err := gone.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("deleted alice: %v", err)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// to dir and returns their paths and a pool trusting it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "korvet"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	roots = x509.NewCertPool()
	roots.AddCert(c)
	return certFile, keyFile, roots
}
