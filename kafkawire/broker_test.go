package kafkawire_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/internal/testbed/enginetest"
	"github.com/korvet/korvet/kafkawire"
	"github.com/korvet/korvet/resp"
)

// broker is a korvet (engine + Kafka server) in the test process, on a
// real redis-server.
type broker struct {
	t      testing.TB
	redis  *testbed.Redis
	rc     *resp.Client
	eng    *engine.Engine
	srv    *kafkawire.Server
	addr   string
	cancel context.CancelFunc
	done   chan error
	opts   engine.Options
	// kopts are the server's options; AdvertisedHost, AdvertisedPort and
	// Logger are filled in, MaxRequestBytes defaults to 8 MiB.
	kopts kafkawire.Options
	// setup, when set, sees each server before it serves (test hooks).
	setup func(*kafkawire.Server)
}

func startBroker(t testing.TB, opts engine.Options) *broker {
	t.Helper()
	return startBrokerWith(t, opts, kafkawire.Options{})
}

// startBrokerWith is startBroker with server options.
func startBrokerWith(t testing.TB, opts engine.Options, kopts kafkawire.Options) *broker {
	t.Helper()
	return startBrokerSetup(t, opts, kopts, nil)
}

// startBrokerSetup is startBrokerWith with setup run on the server before
// it serves.
func startBrokerSetup(t testing.TB, opts engine.Options, kopts kafkawire.Options, setup func(*kafkawire.Server)) *broker {
	t.Helper()
	b := &broker{t: t, redis: testbed.StartRedis(t), opts: opts, kopts: kopts, setup: setup}
	b.start("127.0.0.1:0")
	t.Cleanup(b.stop)
	return b
}

func (b *broker) start(listen string) {
	b.t.Helper()
	opts := b.opts
	if opts.Logger == nil {
		opts.Logger = testbed.Logger()
	}
	eng, rc := enginetest.Open(b.t, b.redis, opts)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		b.t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	kopts := b.kopts
	kopts.AdvertisedHost, kopts.AdvertisedPort, kopts.Logger = "127.0.0.1", int32(port), opts.Logger
	if kopts.MaxRequestBytes == 0 {
		kopts.MaxRequestBytes = 8 << 20
	}
	srv := kafkawire.NewServer(eng, kopts)
	if b.setup != nil {
		b.setup(srv)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln, 5*time.Second) }()
	b.rc, b.eng, b.srv, b.addr, b.cancel, b.done = rc, eng, srv, ln.Addr().String(), cancel, done
}

func (b *broker) stop() {
	if b.cancel == nil {
		return
	}
	b.cancel()
	if err := <-b.done; err != nil {
		b.t.Errorf("serve: %v", err)
	}
	b.eng.Close()
	b.rc.Close()
	b.cancel = nil
}

// restart stops korvet and starts a fresh one on the same Redis and port:
// everything it knows must come back from Redis.
func (b *broker) restart() {
	b.t.Helper()
	addr := b.addr
	b.stop()
	b.start(addr)
}

func (b *broker) client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

func (b *broker) admin() *kadm.Client {
	return kadm.NewClient(b.client())
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
