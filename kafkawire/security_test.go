package kafkawire_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/kafkawire"
)

// secureOpts describes a korvet with security features for a test.
type secureOpts struct {
	plain      bool     // serve a plain listener
	plainSASL  []string // its SASL mechanisms
	tls        bool     // serve a TLS listener
	tlsSASL    []string
	clientCert bool // the TLS listener requires client certificates
	acls       bool
	super      []string
	allowPlain bool
}

// secureBroker is a korvet with a plain and/or a TLS listener.
type secureBroker struct {
	t         *testing.T
	store     *auth.Store
	plainAddr string
	tlsAddr   string
	pki       *pki
}

func startSecure(t *testing.T, o secureOpts) *secureBroker {
	t.Helper()
	log := testbed.Logger()
	ctx := context.Background()
	eng, rc := enginetest.Open(t, testbed.StartRedis(t), engine.Options{AutoCreateTopics: true, Logger: log})
	store, err := auth.Open(ctx, rc, auth.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	b := &secureBroker{t: t, store: store}
	var ls []kafkawire.Listener
	listen := func(tlsCfg *tls.Config, mechs []string) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, kafkawire.Listener{Listener: ln, TLS: tlsCfg, SASL: mechs, AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(ln.Addr().(*net.TCPAddr).Port)})
		return ln.Addr().String()
	}
	if o.plain {
		b.plainAddr = listen(nil, o.plainSASL)
	}
	if o.tls {
		b.pki = newPKI(t)
		caFile := ""
		if o.clientCert {
			caFile = b.pki.caFile
		}
		cfg, err := kafkawire.TLSConfig(b.pki.certFile, b.pki.keyFile, caFile, o.clientCert)
		if err != nil {
			t.Fatal(err)
		}
		b.tlsAddr = listen(cfg, o.tlsSASL)
	}
	srv := kafkawire.NewServer(eng, kafkawire.Options{Logger: log, Auth: store, ACLs: o.acls, SuperUsers: o.super, AllowPlainWithoutTLS: o.allowPlain})
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.ServeListeners(sctx, 5*time.Second, ls...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return b
}

// addUser gives user a password for every SCRAM mechanism.
func (b *secureBroker) addUser(user, password string) {
	b.t.Helper()
	for _, m := range auth.Mechanisms {
		c, err := auth.NewCredential(m, password, auth.MinIterations)
		if err != nil {
			b.t.Fatal(err)
		}
		if err := b.store.SetCredential(context.Background(), m, user, c); err != nil {
			b.t.Fatal(err)
		}
	}
}

func (b *secureBroker) client(addr string, opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.RetryTimeout(5 * time.Second)}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

func scram256(user, pass string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())
}

func scram512(user, pass string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
}

func plainAuth(user, pass string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
}

// roundTrip produces n records to topic and consumes them back.
func roundTrip(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	cl.AddConsumeTopics(topic)
	defer cl.PurgeTopicsFromClient(topic)
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
}

// brokerPort asks the broker, through cl, which port it advertises.
func brokerPort(t *testing.T, cl *kgo.Client) int32 {
	t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil || len(resp.Brokers) != 1 {
		t.Fatalf("metadata: %v %+v", err, resp)
	}
	return resp.Brokers[0].Port
}

func port(addr string) int32 {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := net.LookupPort("tcp", p)
	return int32(n)
}

func TestTLSListener(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, tls: true})
	tlsCl := b.client(b.tlsAddr, kgo.DialTLSConfig(b.pki.clientTLS(false)))
	roundTrip(t, tlsCl, "over-tls", 20)
	plainCl := b.client(b.plainAddr)
	roundTrip(t, plainCl, "over-plain", 5)

	// Each listener advertises itself, in Metadata and FindCoordinator.
	if got, want := brokerPort(t, tlsCl), port(b.tlsAddr); got != want {
		t.Errorf("TLS client told port %d, want %d", got, want)
	}
	if got, want := brokerPort(t, plainCl), port(b.plainAddr); got != want {
		t.Errorf("plain client told port %d, want %d", got, want)
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = "g"
	fc, err := req.RequestWith(ctxT(t, 10*time.Second), tlsCl)
	if err != nil || fc.ErrorCode != 0 || fc.Port != port(b.tlsAddr) {
		t.Errorf("FindCoordinator over TLS: %v, %+v", err, fc)
	}

	// A consumer group works over TLS.
	g := b.client(b.tlsAddr, kgo.DialTLSConfig(b.pki.clientTLS(false)), kgo.ConsumeTopics("over-tls"), kgo.ConsumerGroup("tls-group"))
	if n := pollN(t, g, 20); n != 20 {
		t.Errorf("group consumed %d records", n)
	}

	// A plain client on the TLS port gets nowhere.
	bad := b.client(b.tlsAddr, kgo.DialTimeout(2*time.Second))
	if err := bad.Ping(ctxT(t, 5*time.Second)); err == nil {
		t.Error("plain client on the TLS listener: ping succeeded")
	}
}

func pollN(t *testing.T, cl *kgo.Client, n int) int {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	got := 0
	for got < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if ctx.Err() == nil {
				t.Errorf("fetch: %v", err)
			}
		})
		got += fs.NumRecords()
	}
	return got
}

func TestTLSClientCertificate(t *testing.T) {
	b := startSecure(t, secureOpts{tls: true, clientCert: true, acls: true})
	// The certificate's common name is the principal: give it a topic.
	acls := []auth.ACL{
		{Principal: "User:alice", Host: "*", ResourceType: auth.ResTopic, Pattern: auth.PatternLiteral, Resource: "certs", Operation: auth.OpAll, Permission: auth.PermAllow},
		{Principal: "User:alice", Host: "*", ResourceType: auth.ResCluster, Pattern: auth.PatternLiteral, Resource: auth.ClusterName, Operation: auth.OpIdempotentWrite, Permission: auth.PermAllow},
	}
	if err := b.store.CreateACLs(context.Background(), acls); err != nil {
		t.Fatal(err)
	}
	withCert := b.client(b.tlsAddr, kgo.DialTLSConfig(b.pki.clientTLS(true)))
	roundTrip(t, withCert, "certs", 3)

	noCert := b.client(b.tlsAddr, kgo.DialTLSConfig(b.pki.clientTLS(false)), kgo.DialTimeout(2*time.Second))
	if err := noCert.Ping(ctxT(t, 5*time.Second)); err == nil {
		t.Error("client without a certificate: ping succeeded")
	}
}

func TestSCRAM(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechScramSHA256, kafkawire.MechScramSHA512}})
	b.addUser("ada", "correct horse")
	// Old clients do SaslHandshake v0 and send bare tokens.
	v0 := kversion.Stable()
	v0.SetMaxKeyVersion(17, 0)
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"SCRAM-SHA-256", []kgo.Opt{scram256("ada", "correct horse")}},
		{"SCRAM-SHA-512", []kgo.Opt{scram512("ada", "correct horse")}},
		{"SCRAM-SHA-256 handshake v0", []kgo.Opt{scram256("ada", "correct horse"), kgo.MaxVersions(v0)}},
		{"SCRAM-SHA-512 handshake v0", []kgo.Opt{scram512("ada", "correct horse"), kgo.MaxVersions(v0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := b.client(b.plainAddr, tc.opts...)
			topic := strings.NewReplacer(" ", "-").Replace(tc.name)
			roundTrip(t, cl, topic, 10)
			g := b.client(b.plainAddr, append(tc.opts, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g-"+topic))...)
			if n := pollN(t, g, 10); n != 10 {
				t.Errorf("group consumed %d records", n)
			}
		})
	}
}

func TestSASLBadCredentials(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechScramSHA256, kafkawire.MechScramSHA512}})
	b.addUser("ada", "correct horse")
	v0 := kversion.Stable()
	v0.SetMaxKeyVersion(17, 0)
	for _, tc := range []struct {
		name     string
		opts     []kgo.Opt
		saslFail bool // the client sees SASL_AUTHENTICATION_FAILED
	}{
		{"wrong password", []kgo.Opt{scram256("ada", "battery staple")}, true},
		{"wrong password 512", []kgo.Opt{scram512("ada", "battery staple")}, true},
		{"unknown user", []kgo.Opt{scram256("bob", "correct horse")}, true},
		{"wrong password, handshake v0", []kgo.Opt{scram256("ada", "battery staple"), kgo.MaxVersions(v0)}, false},
		{"no SASL at all", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := b.client(b.plainAddr, append(tc.opts, kgo.RequestRetries(0))...)
			err := cl.Ping(ctxT(t, 10*time.Second))
			if err == nil {
				t.Fatal("ping succeeded")
			}
			if tc.saslFail && !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Errorf("error %v, want SASL_AUTHENTICATION_FAILED", err)
			}
			_, err = kadm.NewClient(cl).ListTopics(ctxT(t, 10*time.Second))
			if err == nil {
				t.Error("listed topics without authenticating")
			}
		})
	}
}

// saslRawConn is a bare Kafka connection for requests no client library sends.
type saslRawConn struct {
	t    *testing.T
	nc   net.Conn
	br   *bufio.Reader
	corr int32
}

func dialSASLRaw(t *testing.T, addr string) *saslRawConn {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &saslRawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// send writes req with a v1/v2 request header.
func (r *saslRawConn) send(req kmsg.Request) {
	r.corr++
	buf := make([]byte, 4, 64)
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.GetVersion()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(r.corr))
	buf = binary.BigEndian.AppendUint16(buf, 4)
	buf = append(buf, "test"...)
	if req.IsFlexible() {
		buf = append(buf, 0)
	}
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	if _, err := r.nc.Write(buf); err != nil {
		r.t.Fatal(err)
	}
}

// recv reads one frame; err is io.EOF (or a reset) when korvet closed.
func (r *saslRawConn) recv() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r.br, hdr[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	_, err := io.ReadFull(r.br, b)
	return b, err
}

func (r *saslRawConn) expectClosed(what string) {
	r.t.Helper()
	if b, err := r.recv(); err == nil {
		r.t.Errorf("%s: got %d bytes, want the connection closed", what, len(b))
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		r.t.Errorf("%s: connection still open", what)
	}
}

func TestUnauthenticatedGetsNoData(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechScramSHA256}})
	admin := b.client(b.plainAddr, scram256("ada", "pw-ada-1234"))
	b.addUser("ada", "pw-ada-1234")
	roundTrip(t, admin, "private", 1)

	// ApiVersions is answered, and lists the SASL APIs.
	r := dialSASLRaw(t, b.plainAddr)
	av := kmsg.NewPtrApiVersionsRequest()
	r.send(av)
	body, err := r.recv()
	if err != nil {
		t.Fatal(err)
	}
	avr := kmsg.NewPtrApiVersionsResponse()
	if err := avr.ReadFrom(body[4:]); err != nil || avr.ErrorCode != 0 {
		t.Fatalf("ApiVersions: %v %d", err, avr.ErrorCode)
	}
	keys := map[int16]bool{}
	for _, k := range avr.ApiKeys {
		keys[k.ApiKey] = true
	}
	if !keys[17] || !keys[36] {
		t.Errorf("ApiVersions on a SASL listener lacks SaslHandshake/SaslAuthenticate: %v", keys)
	}
	// Anything else closes the connection without an answer.
	for _, req := range []kmsg.Request{
		func() kmsg.Request { m := kmsg.NewPtrMetadataRequest(); m.SetVersion(1); return m }(),
		func() kmsg.Request {
			f := kmsg.NewPtrFetchRequest()
			f.SetVersion(4)
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic = "private"
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.PartitionMaxBytes = 1 << 20
			ft.Partitions = append(ft.Partitions, fp)
			f.Topics = append(f.Topics, ft)
			return f
		}(),
	} {
		r := dialSASLRaw(t, b.plainAddr)
		r.send(req)
		r.expectClosed(kmsg.NameForKey(req.Key()))
	}
	// So does SaslAuthenticate without a handshake, after an error.
	r = dialSASLRaw(t, b.plainAddr)
	sa := kmsg.NewPtrSASLAuthenticateRequest()
	sa.SASLAuthBytes = []byte("n,,n=ada,r=abc")
	r.send(sa)
	body, err = r.recv()
	if err != nil {
		t.Fatal(err)
	}
	sar := kmsg.NewPtrSASLAuthenticateResponse()
	if err := sar.ReadFrom(body[4:]); err != nil || sar.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("SaslAuthenticate before handshake: %v, code %d", err, sar.ErrorCode)
	}
	r.expectClosed("after ILLEGAL_SASL_STATE")
	// And an oversized frame before authentication.
	r = dialSASLRaw(t, b.plainAddr)
	if _, err := r.nc.Write([]byte{0, 0x10, 0, 0}); err != nil {
		t.Fatal(err)
	}
	r.expectClosed("1 MiB frame before authentication")
}

func TestPlainMechanism(t *testing.T) {
	mechs := []string{kafkawire.MechScramSHA256, kafkawire.MechPlain}
	b := startSecure(t, secureOpts{plain: true, plainSASL: mechs, tls: true, tlsSASL: mechs})
	b.addUser("ada", "pw-ada-1234")

	cl := b.client(b.plainAddr, plainAuth("ada", "pw-ada-1234"), kgo.RequestRetries(0))
	if err := cl.Ping(ctxT(t, 10*time.Second)); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Errorf("PLAIN without TLS: %v, want UNSUPPORTED_SASL_MECHANISM", err)
	}
	tlsCl := b.client(b.tlsAddr, plainAuth("ada", "pw-ada-1234"), kgo.DialTLSConfig(b.pki.clientTLS(false)))
	roundTrip(t, tlsCl, "plain-over-tls", 3)
	bad := b.client(b.tlsAddr, plainAuth("ada", "nope"), kgo.DialTLSConfig(b.pki.clientTLS(false)), kgo.RequestRetries(0))
	if err := bad.Ping(ctxT(t, 10*time.Second)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("PLAIN with a wrong password: %v", err)
	}
	// SCRAM still works on the plain listener.
	roundTrip(t, b.client(b.plainAddr, scram256("ada", "pw-ada-1234")), "scram-too", 1)

	// Allowed explicitly, PLAIN works without TLS too, also with v0 tokens.
	b2 := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechPlain}, allowPlain: true})
	b2.addUser("ada", "pw-ada-1234")
	roundTrip(t, b2.client(b2.plainAddr, plainAuth("ada", "pw-ada-1234")), "plain", 2)
	v0 := kversion.Stable()
	v0.SetMaxKeyVersion(17, 0)
	roundTrip(t, b2.client(b2.plainAddr, plainAuth("ada", "pw-ada-1234"), kgo.MaxVersions(v0)), "plain-v0", 2)
}

func TestPlainOnlyWithoutTLSRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	eng, rc := enginetest.Open(t, testbed.StartRedis(t), engine.Options{})
	store, err := auth.Open(context.Background(), rc, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := kafkawire.NewServer(eng, kafkawire.Options{Logger: testbed.Logger(), Auth: store})
	err = srv.ServeListeners(context.Background(), time.Second, kafkawire.Listener{Listener: ln, SASL: []string{kafkawire.MechPlain}})
	if err == nil || !strings.Contains(err.Error(), "PLAIN") {
		t.Fatalf("ServeListeners = %v, want a refusal naming PLAIN", err)
	}
}

func TestApiVersionsOffers(t *testing.T) {
	keys := func(cl *kgo.Client) map[int16]bool {
		r, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctxT(t, 10*time.Second), cl)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int16]bool{}
		for _, k := range r.ApiKeys {
			m[k.ApiKey] = true
		}
		return m
	}
	b := startSecure(t, secureOpts{plain: true, tls: true, tlsSASL: []string{kafkawire.MechScramSHA256}})
	b.addUser("ada", "pw-ada-1234")
	plainKeys := keys(b.client(b.plainAddr))
	tlsKeys := keys(b.client(b.tlsAddr, scram256("ada", "pw-ada-1234"), kgo.DialTLSConfig(b.pki.clientTLS(false))))
	for _, k := range []int16{17, 36, 29, 30, 31} {
		if plainKeys[k] {
			t.Errorf("plain listener without SASL or ACLs offers %s", kmsg.NameForKey(k))
		}
	}
	for _, k := range []int16{17, 36, 50, 51} {
		if !tlsKeys[k] {
			t.Errorf("SASL listener does not offer %s", kmsg.NameForKey(k))
		}
	}
	b2 := startSecure(t, secureOpts{plain: true, acls: true, super: []string{"User:ANONYMOUS"}})
	k2 := keys(b2.client(b2.plainAddr))
	if !k2[29] || !k2[30] || !k2[31] {
		t.Error("ACL APIs not offered with ACLs on")
	}
}

func TestScramAdminAPIs(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechScramSHA256}, super: []string{"User:root"},
		tls: true, tlsSASL: []string{kafkawire.MechScramSHA256, kafkawire.MechScramSHA512}})
	b.addUser("root", "pw-root-1234")
	root := b.client(b.plainAddr, scram256("root", "pw-root-1234"))
	adm := kadm.NewClient(root)
	ctx := ctxT(t, 30*time.Second)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "ada", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw-256"},
		{User: "ada", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "pw-512"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := res["ada"].Err; err != nil {
		t.Errorf("upsert ada: %v %s", err, res["ada"].ErrMessage)
	}
	// kadm checks iterations itself: send what a careless client might.
	weak := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "bob", 1, 100, []byte("salt"), make([]byte, 32)
	weak.Upsertions = append(weak.Upsertions, up, up)
	up.Name, up.Iterations = "carol", 4096
	weak.Upsertions = append(weak.Upsertions, up)
	wr, err := weak.RequestWith(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(wr.Results) != 2 || wr.Results[0].ErrorCode != kerr.UnacceptableCredential.Code || wr.Results[1].ErrorCode != 0 {
		t.Errorf("upsert bob with 100 iterations (twice), carol: %+v", wr.Results)
	}
	desc, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(desc) != 3 || len(desc["ada"].CredInfos) != 2 || desc["ada"].CredInfos[1] != (kadm.CredInfo{Mechanism: kadm.ScramSha512, Iterations: 8192}) {
		t.Errorf("described %+v", desc)
	}
	desc, err = adm.DescribeUserSCRAMs(ctx, "ada", "dave")
	if err != nil {
		t.Fatal(err)
	}
	if desc["ada"].Err != nil || !errors.Is(desc["dave"].Err, kerr.ResourceNotFound) {
		t.Errorf("describe ada, dave: %+v", desc)
	}

	tlsCfg := kgo.DialTLSConfig(b.pki.clientTLS(false))
	roundTrip(t, b.client(b.tlsAddr, tlsCfg, scram256("ada", "pw-256")), "t256", 1)
	roundTrip(t, b.client(b.tlsAddr, tlsCfg, scram512("ada", "pw-512")), "t512", 1)

	res, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "ada", Mechanism: kadm.ScramSha512}, {User: "dave", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res["ada"].Err != nil || !errors.Is(res["dave"].Err, kerr.ResourceNotFound) {
		t.Errorf("delete: %+v", res)
	}
	cl := b.client(b.tlsAddr, tlsCfg, scram512("ada", "pw-512"), kgo.RequestRetries(0))
	if err := cl.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("deleted credential: %v", err)
	}
}

// TestScramAdminSuperOnly: DescribeUserScramCredentials and
// AlterUserScramCredentials answer only super users, with ACLs on or off:
// not anonymous clients (even with User:ANONYMOUS among the super users),
// nor an authenticated user, even one that ACLs allow everything on the
// cluster. ApiVersions still lists them.
func TestScramAdminSuperOnly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		acls  bool
		super []string
	}{
		{"acls off", false, []string{"User:root"}},
		{"acls on", true, []string{"User:root"}},
		{"acls on, anonymous super", true, []string{"User:root", "User:ANONYMOUS"}},
		{"acls off, anonymous super", false, []string{"User:root", "User:ANONYMOUS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startSecure(t, secureOpts{plain: true, acls: tc.acls, super: tc.super,
				tls: true, tlsSASL: []string{kafkawire.MechScramSHA256}})
			b.addUser("root", "pw-root-1234")
			b.addUser("alice", "pw-alice-1234")
			ctx := ctxT(t, 30*time.Second)
			if tc.acls {
				all := auth.ACL{Principal: "User:alice", Host: "*", ResourceType: auth.ResCluster, Pattern: auth.PatternLiteral,
					Resource: auth.ClusterName, Operation: auth.OpAll, Permission: auth.PermAllow}
				if err := b.store.CreateACLs(ctx, []auth.ACL{all}); err != nil {
					t.Fatal(err)
				}
			}
			tlsCfg := kgo.DialTLSConfig(b.pki.clientTLS(false))
			clients := map[string]*kgo.Client{
				"anonymous": b.client(b.plainAddr, kgo.RequestRetries(0)),
				"alice":     b.client(b.tlsAddr, tlsCfg, scram256("alice", "pw-alice-1234"), kgo.RequestRetries(0)),
				"root":      b.client(b.tlsAddr, tlsCfg, scram256("root", "pw-root-1234"), kgo.RequestRetries(0)),
			}
			for _, who := range []string{"anonymous", "alice", "root"} {
				cl := clients[who]
				versions, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
				if err != nil {
					t.Fatal(err)
				}
				offered := 0
				for _, k := range versions.ApiKeys {
					if k.ApiKey == 50 || k.ApiKey == 51 {
						offered++
					}
				}
				if offered != 2 {
					t.Errorf("%s: ApiVersions lists %d of the 2 SCRAM user APIs", who, offered)
				}

				desc, err := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest().RequestWith(ctx, cl)
				if err != nil {
					t.Fatalf("%s describe: %v", who, err)
				}
				alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
				up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
				salted := make([]byte, 32)
				up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "by-"+who, 1, 4096, []byte("salt-"+who), salted
				alter.Upsertions = append(alter.Upsertions, up)
				del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
				del.Name, del.Mechanism = "alice", 2
				alter.Deletions = append(alter.Deletions, del)
				ar, err := alter.RequestWith(ctx, cl)
				if err != nil {
					t.Fatalf("%s alter: %v", who, err)
				}
				_, created, err := b.store.Credential(ctx, auth.ScramSHA256, "by-"+who)
				if err != nil {
					t.Fatal(err)
				}
				_, alice512, err := b.store.Credential(ctx, auth.ScramSHA512, "alice")
				if err != nil {
					t.Fatal(err)
				}

				if who == "root" {
					if desc.ErrorCode != 0 || len(desc.Results) != 2 {
						t.Errorf("root describe: code %d, %d users, want 0 and 2 (root, alice)", desc.ErrorCode, len(desc.Results))
					}
					if len(ar.Results) != 2 || ar.Results[0].ErrorCode != 0 || ar.Results[1].ErrorCode != 0 || !created || alice512 {
						t.Errorf("root alter: %+v, by-root created %v, alice's SHA-512 left %v", ar.Results, created, alice512)
					}
					continue
				}
				if desc.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(desc.Results) != 0 {
					t.Errorf("%s describe: code %d with %d users, want CLUSTER_AUTHORIZATION_FAILED and none", who, desc.ErrorCode, len(desc.Results))
				}
				if len(ar.Results) != 2 {
					t.Fatalf("%s alter: %d results, want 2", who, len(ar.Results))
				}
				for _, r := range ar.Results {
					if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
						t.Errorf("%s alter %s: code %d, want CLUSTER_AUTHORIZATION_FAILED", who, r.User, r.ErrorCode)
					}
				}
				if created || !alice512 {
					t.Errorf("%s alter went through: by-%s created %v, alice's SHA-512 left %v", who, who, created, alice512)
				}
			}
		})
	}
}

func TestACLs(t *testing.T) {
	b := startSecure(t, secureOpts{plain: true, plainSASL: []string{kafkawire.MechScramSHA256}, acls: true, super: []string{"User:admin"}})
	for _, u := range []string{"admin", "alice", "bob"} {
		b.addUser(u, "pw-"+u+"-1234")
	}
	as := func(u string, opts ...kgo.Opt) *kgo.Client {
		return b.client(b.plainAddr, append([]kgo.Opt{scram256(u, "pw-"+u+"-1234"), kgo.RequestRetries(1)}, opts...)...)
	}
	ctx := ctxT(t, 60*time.Second)
	admin := kadm.NewClient(as("admin"))
	if _, err := admin.CreateTopics(ctx, 1, 1, nil, "orders", "secret"); err != nil {
		t.Fatal(err)
	}
	create := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := admin.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create ACL %+v: %v", r, r.Err)
			}
		}
	}
	create(kadm.NewACLs().Topics("orders").Allow("User:alice").Operations(kadm.OpWrite, kadm.OpRead))
	create(kadm.NewACLs().Groups("app-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:alice").Operations(kadm.OpRead))

	// alice: produce and consume orders in group app-1.
	alice := as("alice", kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("app-1"))
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("o1")}).FirstErr(); err != nil {
		t.Fatalf("alice produce orders: %v", err)
	}
	if n := pollN(t, alice, 1); n != 1 {
		t.Fatalf("alice consumed %d", n)
	}
	if err := alice.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("alice commit: %v", err)
	}
	// Not secret, whether it exists or not, nor topics she may not create.
	noIdem := as("alice", kgo.DisableIdempotentWrite())
	for _, topic := range []string{"secret", "orders-new"} {
		if err := noIdem.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("alice produce %s: %v, want TOPIC_AUTHORIZATION_FAILED", topic, err)
		}
	}
	// Metadata lists only what she may describe.
	aliceAdm := kadm.NewClient(as("alice"))
	topics, err := aliceAdm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); len(names) != 1 || names[0] != "orders" {
		t.Errorf("alice sees topics %v", names)
	}
	// A group outside app-*.
	other := as("alice", kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("other"))
	fs := other.PollFetches(ctxT(t, 10*time.Second))
	var groupErr error
	fs.EachError(func(_ string, _ int32, err error) { groupErr = err })
	if !errors.Is(groupErr, kerr.GroupAuthorizationFailed) {
		t.Errorf("alice in group other: %v, want GROUP_AUTHORIZATION_FAILED", groupErr)
	}
	// Not an administrator.
	if res, err := aliceAdm.CreateACLs(ctx, kadm.NewACLs().Topics("secret").Allow("User:alice").Operations(kadm.OpRead)); err == nil && res[0].Err == nil {
		t.Error("alice created an ACL")
	} else if err == nil && !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("alice create ACL: %v", res[0].Err)
	}

	// bob may do nothing: not see orders, not get a producer id, not
	// fetch even when he knows the topic id.
	bob := as("bob")
	if err := bob.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("bob produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	pid, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, bob)
	if err != nil || pid.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("bob InitProducerId: %v, code %d, want CLUSTER_AUTHORIZATION_FAILED", err, pid.ErrorCode)
	}
	all, err := admin.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bobFetch := kmsg.NewPtrFetchRequest()
	bobFetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "orders", all["orders"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = []kmsg.FetchRequestTopicPartition{fp}
	bobFetch.Topics = []kmsg.FetchRequestTopic{ft}
	fr, err := bobFetch.RequestWith(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || len(fr.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Errorf("bob fetch orders: %+v", fr.Topics)
	}

	// A deny beats the allow.
	create(kadm.NewACLs().Topics("orders").Deny("User:alice").Operations(kadm.OpWrite))
	if err := noIdem.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice produce after deny: %v", err)
	}

	// Describe, then delete.
	described, err := admin.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range described {
		if d.Err != nil {
			t.Errorf("describe %+v: %v", d, d.Err)
		}
		n += len(d.Described)
	}
	if n != 4 {
		t.Errorf("described %d ACLs, want 4: %+v", n, described)
	}
	deleted, err := admin.DeleteACLs(ctx, kadm.NewACLs().Topics("orders").Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	n = 0
	for _, d := range deleted {
		n += len(d.Deleted)
	}
	if n != 3 {
		t.Errorf("deleted %d ACLs, want 3: %+v", n, deleted)
	}
	if got := b.store.ACLs(auth.Filter{ResourceType: auth.ResAny, Pattern: auth.PatternAny, Operation: auth.OpAny, Permission: auth.PermAny}); len(got) != 1 {
		t.Errorf("left %v", got)
	}
	if err := noIdem.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice produce after delete: %v", err)
	}
}

// pki is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate for alice, as PEM files.
type pki struct {
	t                         *testing.T
	caPool                    *x509.CertPool
	certFile, keyFile, caFile string
	clientCert                tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "korvet test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: ips, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := &pki{t: t, caPool: x509.NewCertPool()}
	p.caPool.AddCert(ca)
	p.caFile = write("ca.pem", "CERTIFICATE", caDER)
	srvDER, srvKey := issue(2, "korvet", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.certFile = write("server.pem", "CERTIFICATE", srvDER)
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	p.keyFile = write("server-key.pem", "EC PRIVATE KEY", keyDER)
	cliDER, cliKey := issue(3, "alice", x509.ExtKeyUsageClientAuth, nil)
	p.clientCert = tls.Certificate{Certificate: [][]byte{cliDER}, PrivateKey: cliKey}
	return p
}

// clientTLS trusts the test CA and, with cert, presents alice's
// certificate.
func (p *pki) clientTLS(cert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: p.caPool, MinVersion: tls.VersionTLS12}
	if cert {
		cfg.Certificates = []tls.Certificate{p.clientCert}
	}
	return cfg
}
