package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/engine/auth"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/kafkawire"
)

// adminEnv is a korvet in the test process for the admin API: a real
// redis-server, the engine, the Kafka server (with ACLs on, User:root the
// super user) and the HTTP side over a real socket, with kadm logged in as
// User:root over SCRAM as the Kafka-side view.
type adminEnv struct {
	t       *testing.T
	eng     *engine.Engine
	store   *auth.Store
	kafka   *kafkawire.Server
	srv     *server
	base    string // http://127.0.0.1:port
	kafkaAt string
	adm     *kadm.Client
	logs    *syncBuffer // the HTTP side's log (audit lines)
}

const rootPassword = "root-secret-pw"

func startAdmin(t *testing.T) *adminEnv {
	t.Helper()
	ctx := context.Background()
	r := testbed.StartRedis(t)
	eng, rc := enginetest.Open(t, r, engine.Options{Logger: quiet, GroupInitialRebalanceDelay: -1})
	store, err := auth.Open(ctx, rc, auth.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e := &adminEnv{t: t, eng: eng, store: store}
	e.addUser("root", rootPassword)
	policy := &auth.Policy{Store: store, ACLs: true, SuperUsers: []string{"User:root"}}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.kafkaAt = ln.Addr().String()
	e.kafka = kafkawire.NewServer(eng, kafkawire.Options{Logger: quiet, Auth: store, ACLs: true, SuperUsers: policy.SuperUsers})
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- e.kafka.ServeListeners(sctx, 5*time.Second, kafkawire.Listener{Listener: ln, SASL: []string{kafkawire.MechScramSHA256, kafkawire.MechScramSHA512},
			AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(ln.Addr().(*net.TCPAddr).Port)})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kafka serve: %v", err)
		}
	})

	e.logs = &syncBuffer{}
	var h http.Handler
	e.srv, h = build(eng, Options{Version: "test", Started: time.Now(), Logger: slog.New(slog.NewTextHandler(e.logs, nil)), Policy: policy, Passwords: store,
		Login: LoginBasic, Admin: func(ctx context.Context, principal string, super bool, host string, req kmsg.Request) (kmsg.Response, error) {
			return e.kafka.Local(ctx, kafkawire.Caller{Principal: principal, Super: super, Host: host}, req)
		}})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	e.base = hs.URL

	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kafkaAt), kgo.SASL(scram.Auth{User: "root", Pass: rootPassword}.AsSha256Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e.adm = kadm.NewClient(cl)
	return e
}

// addUser gives user a SCRAM-SHA-256 password.
func (e *adminEnv) addUser(user, password string) {
	e.t.Helper()
	c, err := auth.NewCredential(auth.ScramSHA256, password, auth.MinIterations)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.SetCredential(context.Background(), auth.ScramSHA256, user, c); err != nil {
		e.t.Fatal(err)
	}
}

// allow grants principal op on a literal resource.
func (e *adminEnv) allow(principal string, rt auth.ResourceType, name string, op auth.Operation) {
	e.t.Helper()
	if err := e.store.CreateACLs(context.Background(), []auth.ACL{{Principal: principal, Host: "*", ResourceType: rt,
		Pattern: auth.PatternLiteral, Resource: name, Operation: op, Permission: auth.PermAllow}}); err != nil {
		e.t.Fatal(err)
	}
}

// reply is an HTTP answer: status, headers and body.
type reply struct {
	code int
	hdr  http.Header
	body []byte
}

// json decodes the body into v, failing the test if it is not JSON.
func (r reply) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d is not JSON: %v: %s", r.code, err, r.body)
	}
}

// apiErr is the admin API's error body.
func (r reply) apiErr(t *testing.T) (code, msg string) {
	t.Helper()
	var b struct{ Error, Message string }
	r.json(t, &b)
	return b.Error, b.Message
}

// as sends a request as user (Basic; "" for none) with a JSON body.
func (e *adminEnv) as(user, password, method, path string, body any) reply {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{code: res.StatusCode, hdr: res.Header, body: b}
}

// root sends a request as the super user.
func (e *adminEnv) root(method, path string, body any) reply {
	return e.as("root", rootPassword, method, path, body)
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// syncBuffer is a log sink tests read while korvet writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged lines that contain every one of subs.
func (b *syncBuffer) lines(subs ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok && l != "" {
			out = append(out, l)
		}
	}
	return out
}
