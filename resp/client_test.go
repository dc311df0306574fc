package resp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

func newClient(t *testing.T, url string, opts resp.Options) *resp.Client {
	t.Helper()
	c, err := resp.New(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustDo(t *testing.T, c interface {
	Do(context.Context, ...any) (resp.Reply, error)
}, args ...any) resp.Reply {
	t.Helper()
	r, err := c.Do(ctxT(t), args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}

func TestDoRoundTrip(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{})
	ctx := ctxT(t)
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	values := map[string][]byte{
		"crlf":  []byte("a\r\nb\r\n"),
		"zeros": {0, 0, 1, 0},
		"empty": {},
		"big":   big,
		"resp":  []byte("*1\r\n$-1\r\n"),
	}
	for k, v := range values {
		if r := mustDo(t, c, "SET", k, v); string(r.Bytes()) != "OK" {
			t.Fatalf("SET %s: %q", k, r.Bytes())
		}
	}
	for k, v := range values {
		r := mustDo(t, c, "GET", k)
		if r.IsNil() || !bytes.Equal(r.Bytes(), v) {
			t.Fatalf("GET %s: nil=%v len %d, want %d bytes", k, r.IsNil(), len(r.Bytes()), len(v))
		}
	}
	// The reply is a copy: it survives later calls reusing the buffers.
	r1 := mustDo(t, c, "GET", "crlf")
	mustDo(t, c, "GET", "big")
	if string(r1.Bytes()) != "a\r\nb\r\n" {
		t.Fatalf("reply changed under us: %q", r1.Bytes())
	}

	if r := mustDo(t, c, "GET", "missing"); !r.IsNil() || r.Bytes() != nil {
		t.Fatalf("GET missing: %+v", r)
	}
	if r := mustDo(t, c, "GET", "empty"); r.IsNil() {
		t.Fatal("empty value reported as nil")
	}
	if v, err := mustDo(t, c, "INCRBY", "n", int64(-5)).Int(); err != nil || v != -5 {
		t.Fatalf("INCRBY: %d %v", v, err)
	}
	if v, err := mustDo(t, c, "GET", "n").Int(); err != nil || v != -5 {
		t.Fatalf("Int of bulk: %d %v", v, err)
	}
	if _, err := mustDo(t, c, "GET", "crlf").Int(); err == nil {
		t.Fatal("Int of non-number succeeded")
	}
	mustDo(t, c, "RPUSH", "l", "a", []byte{}, 3, uint64(18446744073709551615))
	elems := mustDo(t, c, "LRANGE", "l", 0, -1).Elems(nil)
	var got []string
	for _, e := range elems {
		got = append(got, string(e.Bytes()))
	}
	if strings.Join(got, ",") != "a,,3,18446744073709551615" {
		t.Fatalf("LRANGE: %q", got)
	}
	if r := mustDo(t, c, "LRANGE", "nope", 0, -1); r.IsNil() || r.Len() != 0 {
		t.Fatalf("empty LRANGE: nil=%v len=%d", r.IsNil(), r.Len())
	}
	if r := mustDo(t, c, "BLPOP", "nope", "0.01"); !r.IsNil() || !r.IsNilArray() {
		t.Fatalf("timed out BLPOP not a null array: %q", r.Raw)
	}
}

func TestStreams(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{})
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("5-%d", i)
		if r := mustDo(t, c, "XADD", "s", id, "v", []byte{byte(i), '\r', '\n'}); string(r.Bytes()) != id {
			t.Fatalf("XADD returned %q", r.Bytes())
		}
	}
	if _, err := c.Do(ctxT(t), "XADD", "s", "5-1", "v", "x"); err == nil || !strings.Contains(err.Error(), "equal or smaller") {
		t.Fatalf("XADD with a stale ID: %v", err)
	}
	entries := mustDo(t, c, "XRANGE", "s", "5-2", "+").Elems(nil)
	if len(entries) != 2 {
		t.Fatalf("%d entries", len(entries))
	}
	for i, e := range entries {
		f := e.Elems(nil)
		fv := f[1].Elems(nil)
		if string(f[0].Bytes()) != fmt.Sprintf("5-%d", i+2) || string(fv[0].Bytes()) != "v" ||
			!bytes.Equal(fv[1].Bytes(), []byte{byte(i + 2), '\r', '\n'}) {
			t.Fatalf("entry %d: %q %q %q", i, f[0].Bytes(), fv[0].Bytes(), fv[1].Bytes())
		}
	}
}

func TestPipeline10k(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{})
	const n = 10000
	var p resp.Pipeline
	for i := range n {
		p.Array(3)
		p.String("SET")
		p.Int(int64(i))
		p.String(strings.Repeat("x", i%50))
	}
	for i := range n {
		p.Cmd("GET", i)
	}
	rs, err := c.Exec(ctxT(t), &p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Release()
	if rs.Len() != 2*n {
		t.Fatalf("%d replies", rs.Len())
	}
	for i := range n {
		if s := string(rs.At(i).Bytes()); s != "OK" {
			t.Fatalf("SET %d: %q", i, s)
		}
		if got := rs.At(n + i).Bytes(); len(got) != i%50 {
			t.Fatalf("GET %d: %d bytes", i, len(got))
		}
	}
	// An empty pipeline is a no-op.
	p.Reset()
	rs2, err := c.Exec(ctxT(t), &p)
	if err != nil || rs2.Len() != 0 {
		t.Fatalf("empty pipeline: %v", err)
	}
	rs2.Release()
}

func TestMultiExec(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{})
	var p resp.Pipeline
	p.Cmd("MULTI")
	p.Cmd("SET", "k", "v")
	p.Cmd("INCR", "n")
	p.Cmd("LPUSH", "k", "x") // WRONGTYPE at EXEC time, inside the array
	p.Cmd("GET", "k")
	p.Cmd("EXEC")
	rs, err := c.Exec(ctxT(t), &p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Release()
	for i := 1; i <= 4; i++ {
		if s := string(rs.At(i).Bytes()); s != "QUEUED" {
			t.Fatalf("reply %d: %q", i, s)
		}
	}
	exec := rs.At(5)
	if exec.Err() != nil || exec.IsNil() || exec.Len() != 4 {
		t.Fatalf("EXEC reply %q", exec.Raw)
	}
	el := exec.Elems(nil)
	if string(el[0].Bytes()) != "OK" {
		t.Fatalf("SET in EXEC: %q", el[0].Raw)
	}
	if v, _ := el[1].Int(); v != 1 {
		t.Fatalf("INCR in EXEC: %q", el[1].Raw)
	}
	var re *resp.Error
	if !errors.As(el[2].Err(), &re) || re.Prefix != "WRONGTYPE" {
		t.Fatalf("LPUSH in EXEC: %q", el[2].Raw)
	}
	if string(el[3].Bytes()) != "v" {
		t.Fatalf("GET in EXEC: %q", el[3].Raw)
	}
}

func TestExecAbort(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{})
	var p resp.Pipeline
	p.Cmd("MULTI")
	p.Cmd("SET", "k", "v")
	p.Cmd("NOSUCHCOMMAND", "x")
	p.Cmd("EXEC")
	rs, err := c.Exec(ctxT(t), &p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Release()
	var re *resp.Error
	if !errors.As(rs.At(2).Err(), &re) || re.Prefix != "ERR" {
		t.Fatalf("unknown command: %q", rs.At(2).Raw)
	}
	if !errors.As(rs.At(3).Err(), &re) || re.Prefix != "EXECABORT" {
		t.Fatalf("EXEC: %q", rs.At(3).Raw)
	}
	if r := mustDo(t, c, "GET", "k"); !r.IsNil() {
		t.Fatal("aborted transaction applied")
	}
}

func TestWatchAbort(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{PoolSize: 2})
	ctx := ctxT(t)
	conn, err := c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, conn, "WATCH", "k")
	mustDo(t, c, "SET", "k", "other") // another connection changes the key
	var p resp.Pipeline
	p.Cmd("MULTI")
	p.Cmd("SET", "k", "mine")
	p.Cmd("EXEC")
	rs, err := conn.Exec(ctx, &p)
	if err != nil {
		t.Fatal(err)
	}
	exec := rs.At(2)
	if !exec.IsNil() || !exec.IsNilArray() || exec.Len() != 0 || exec.Err() != nil {
		t.Fatalf("EXEC after a WATCH conflict: %q", exec.Raw)
	}
	rs.Release()
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Do(ctx, "PING"); err == nil {
		t.Fatal("Conn usable after Close")
	}
	if s := string(mustDo(t, c, "GET", "k").Bytes()); s != "other" {
		t.Fatalf("k = %q", s)
	}
}

// A Conn closed inside MULTI or with a WATCH must not hand that state to
// the pool's next user.
func TestConnCloseResetsState(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{PoolSize: 1})
	ctx := ctxT(t)
	conn, err := c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustDo(t, conn, "WATCH", "w")
	mustDo(t, conn, "MULTI")
	conn.Close()
	if s := string(mustDo(t, c, "SET", "k", "v").Bytes()); s != "OK" {
		t.Fatalf("SET after a dropped MULTI: %q", s)
	}
	conn, err = c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustDo(t, conn, "SET", "w", "changed") // would abort a leaked WATCH
	var p resp.Pipeline
	p.Cmd("MULTI")
	p.Cmd("INCR", "n")
	p.Cmd("EXEC")
	rs, err := conn.Exec(ctx, &p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Release()
	if rs.At(2).IsNil() {
		t.Fatal("a WATCH leaked through the pool")
	}
}

func TestErrorReplies(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{})
	mustDo(t, c, "SET", "k", "v")
	r, err := c.Do(ctxT(t), "LPUSH", "k", "x")
	var re *resp.Error
	if !errors.As(err, &re) || re.Prefix != "WRONGTYPE" || !strings.HasPrefix(re.Msg, "Operation against a key") {
		t.Fatalf("LPUSH on a string: %v", err)
	}
	if resp.IsConnError(err) || errors.Is(err, resp.ErrUnknownOutcome) {
		t.Fatal("error reply classified as a connection error")
	}
	if r.Err() == nil || err.Error() != string(r.Bytes()) {
		t.Fatalf("Error() %q vs reply %q", err, r.Bytes())
	}
	// In a pipeline, errors are per reply and do not fail Exec.
	var p resp.Pipeline
	p.Cmd("LPUSH", "k", "x")
	p.Cmd("GET", "k")
	rs, err := c.Exec(ctxT(t), &p)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Release()
	if !errors.As(rs.At(0).Err(), &re) || re.Prefix != "WRONGTYPE" || string(rs.At(1).Bytes()) != "v" {
		t.Fatalf("replies %q %q", rs.At(0).Raw, rs.At(1).Raw)
	}
	// A malformed pipeline is refused before anything is sent.
	p.Reset()
	p.Array(2)
	p.String("GET")
	if _, err := c.Exec(ctxT(t), &p); err == nil || resp.IsConnError(err) {
		t.Fatalf("malformed pipeline: %v", err)
	}
	if _, err := c.Do(ctxT(t), "SET", "k", 1.5); err == nil {
		t.Fatal("float argument accepted")
	}
	if err := c.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func TestSelectDB(t *testing.T) {
	rd := testbed.StartRedis(t)
	c3 := newClient(t, strings.TrimSuffix(rd.URL, "/0")+"/3", resp.Options{})
	c0 := newClient(t, rd.URL, resp.Options{})
	mustDo(t, c3, "SET", "k", "in3")
	if r := mustDo(t, c0, "GET", "k"); !r.IsNil() {
		t.Fatal("db 3 write visible in db 0")
	}
	if s := string(mustDo(t, c3, "GET", "k").Bytes()); s != "in3" {
		t.Fatalf("db 3: %q", s)
	}
	name := mustDo(t, c0, "CLIENT", "GETNAME")
	if string(name.Bytes()) != "korvet" {
		t.Fatalf("client name %q", name.Bytes())
	}
}

func TestUnixSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	if len(sock) > 100 {
		t.Skipf("socket path too long for unix sockets: %s", sock)
	}
	testbed.StartRedis(t, "--unixsocket", sock, "--unixsocketperm", "700")
	c := newClient(t, "unix://"+sock+"?db=2", resp.Options{})
	mustDo(t, c, "SET", "k", "v")
	if s := string(mustDo(t, c, "GET", "k").Bytes()); s != "v" {
		t.Fatalf("GET over unix socket: %q", s)
	}
}

func TestAuth(t *testing.T) {
	rd := testbed.StartRedis(t, "--requirepass", "secret")
	host := strings.TrimPrefix(rd.URL, "redis://")
	c := newClient(t, "redis://:secret@"+host, resp.Options{})
	if err := c.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	bad := newClient(t, "redis://:wrong@"+host, resp.Options{})
	err := bad.Ping(ctxT(t))
	if err == nil || !resp.IsConnError(err) || !strings.Contains(err.Error(), "WRONGPASS") || !strings.Contains(err.Error(), "AUTH") {
		t.Fatalf("wrong password: %v", err)
	}
	if errors.Is(err, resp.ErrUnknownOutcome) {
		t.Fatal("a failed handshake claims the command may have run")
	}
	var re *resp.Error
	if errors.As(err, &re) {
		t.Fatal("handshake failure looks like a reply to the caller's command")
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("error leaks the password: %v", err)
	}

	none := newClient(t, rd.URL, resp.Options{})
	if err := none.Ping(ctxT(t)); err == nil || !strings.Contains(err.Error(), "requires a password") {
		t.Fatalf("no password: %v", err)
	}

	// ACL user with a name.
	mustDo(t, c, "ACL", "SETUSER", "alice", "on", ">pw", "~*", "&*", "+@all")
	alice := newClient(t, "redis://alice:pw@"+host, resp.Options{})
	if s := string(mustDo(t, alice, "ACL", "WHOAMI").Bytes()); s != "alice" {
		t.Fatalf("WHOAMI %q", s)
	}
}

func TestReconnect(t *testing.T) {
	rd := testbed.StartRedis(t, "--enable-debug-command", "local")
	c := newClient(t, rd.URL, resp.Options{PoolSize: 4})
	mustDo(t, c, "SET", "k", "before")
	// Fill the pool with idle connections that the kill will make stale.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := c.Do(context.Background(), "DEBUG", "SLEEP", "0.05"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	rd.Kill() // Redis wrote k to the AOF before replying: it survives

	var sawUnreachable bool
	for i := range 20 {
		start := time.Now()
		_, err := c.Do(ctxT(t), "GET", "k")
		if err == nil {
			t.Fatalf("call %d succeeded against a dead server", i)
		}
		if !resp.IsConnError(err) {
			t.Fatalf("call %d: not a conn error: %v", i, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("call %d took %v", i, d)
		}
		if i < 3 {
			t.Logf("call %d after kill: %v", i, err)
		}
		if strings.Contains(err.Error(), "unreachable") && strings.Contains(err.Error(), rd.Addr) &&
			strings.Contains(err.Error(), "connection refused") {
			sawUnreachable = true
			if errors.Is(err, resp.ErrUnknownOutcome) {
				t.Fatalf("backoff error claims an unknown outcome: %v", err)
			}
		}
		time.Sleep(10 * time.Millisecond) // the calls spread over the reconnect backoff
	}
	if !sawUnreachable {
		t.Fatal("never saw the backoff error")
	}

	rd.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := c.Do(ctxT(t), "GET", "k")
		if err == nil {
			if string(r.Bytes()) != "before" {
				t.Fatalf("after restart k = %q", r.Bytes())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Backoff reset: the next calls succeed at once.
	for range 10 {
		mustDo(t, c, "PING")
	}
}

func TestTimeouts(t *testing.T) {
	rd := testbed.StartRedis(t, "--enable-debug-command", "local")
	c := newClient(t, rd.URL, resp.Options{PoolSize: 2})

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Do(ctx, "BLPOP", "nothing", 0)
	if !errors.Is(err, context.DeadlineExceeded) || !resp.IsConnError(err) || !errors.Is(err, resp.ErrUnknownOutcome) {
		t.Fatalf("BLPOP past the deadline: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("deadline honoured after %v", d)
	}
	if err := c.Ping(ctxT(t)); err != nil {
		t.Fatalf("pool unusable after a timeout: %v", err)
	}

	// Cancellation interrupts a blocked read.
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel2)
	start = time.Now()
	if _, err := c.Do(ctx2, "BLPOP", "nothing", 0); !errors.Is(err, context.Canceled) || !resp.IsConnError(err) {
		t.Fatalf("cancelled BLPOP: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("cancellation honoured after %v", d)
	}
	// DEBUG SLEEP stalls the whole server; the deadline still holds.
	ctx3, cancel3 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel3()
	start = time.Now()
	if _, err := c.Do(ctx3, "DEBUG", "SLEEP", "1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("deadline honoured after %v", d)
	}
	if err := c.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	// Without a ctx deadline, Options.Timeout applies.
	short := newClient(t, rd.URL, resp.Options{Timeout: 100 * time.Millisecond})
	start = time.Now()
	_, err = short.Do(context.Background(), "BLPOP", "nothing", 0)
	if err == nil || !strings.Contains(err.Error(), "no reply within 100ms") || !resp.IsConnError(err) {
		t.Fatalf("Options.Timeout: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Timeout honoured after %v", d)
	}
	if err := short.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestPoolBounded(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{PoolSize: 1})
	conn, err := c.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Do(ctx, "PING")
	if !errors.Is(err, context.DeadlineExceeded) || !resp.IsConnError(err) || errors.Is(err, resp.ErrUnknownOutcome) {
		t.Fatalf("waiting on a full pool: %v", err)
	}
	// Without a ctx deadline the wait is bounded by Timeout.
	short := newClient(t, rd.URL, resp.Options{PoolSize: 1, Timeout: 50 * time.Millisecond})
	sconn, err := short.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := short.Do(context.Background(), "PING"); err == nil || !strings.Contains(err.Error(), "busy for 50ms") {
		t.Fatalf("waiting on a full pool without a deadline: %v", err)
	}
	sconn.Close()
	conn.Close()
	if err := c.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// A closed client fails fast, also for callers already waiting.
	conn, err = c.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := c.Do(context.Background(), "PING"); errc <- err }()
	// Its goroutine's stack shows when the caller waits for a slot.
	testbed.WaitFor(t, 5*time.Second, "a caller waiting for a slot", func() bool {
		stacks := make([]byte, 1<<20)
		return bytes.Contains(stacks[:runtime.Stack(stacks, true)], []byte("resp.(*Client).waitSlot"))
	})
	c.Close()
	if err := <-errc; !errors.Is(err, resp.ErrClosed) {
		t.Fatalf("waiter after Close: %v", err)
	}
	conn.Close()
	if _, err := c.Do(ctxT(t), "PING"); !errors.Is(err, resp.ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{PoolSize: 3})
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			var p resp.Pipeline
			for i := range 50 {
				p.Reset()
				p.Cmd("INCR", "n")
				p.Cmd("SET", "g"+strconv.Itoa(g), i)
				rs, err := c.Exec(context.Background(), &p)
				if err != nil {
					t.Error(err)
					return
				}
				rs.Release()
			}
		})
	}
	wg.Wait()
	if v, _ := mustDo(t, c, "GET", "n").Int(); v != 600 {
		t.Fatalf("n = %d", v)
	}
}

func TestMaxReplyBytes(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{MaxReplyBytes: 1024})
	mustDo(t, c, "SET", "small", strings.Repeat("s", 100))
	mustDo(t, c, "SET", "big", strings.Repeat("b", 4096))
	_, err := c.Do(ctxT(t), "GET", "big")
	if !resp.IsConnError(err) || !strings.Contains(err.Error(), "MaxReplyBytes") {
		t.Fatalf("oversized reply: %v", err)
	}
	if r := mustDo(t, c, "GET", "small"); len(r.Bytes()) != 100 {
		t.Fatalf("after an oversized reply: %q", r.Raw)
	}
}

// Exec must not allocate per command: only amortised buffer growth.
func TestExecAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{})
	var p resp.Pipeline
	key := []byte("k")
	run := func() {
		p.Reset()
		for i := range 1000 {
			p.Array(3)
			p.String("SET")
			p.Bulk(key)
			p.Int(int64(i))
			p.Array(2)
			p.String("GET")
			p.Bulk(key)
		}
		rs, err := c.Exec(context.Background(), &p)
		if err != nil {
			t.Fatal(err)
		}
		rs.Release()
	}
	run()
	if n := testbed.Allocs(20, run); n > 1 {
		t.Fatalf("%v allocations per 2000-command Exec", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if n := testbed.Allocs(20, func() {
		p.Reset()
		p.Cmd("PING")
		rs, err := c.Exec(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		rs.Release()
	}); n > 4 {
		t.Fatalf("%v allocations per Exec with a cancellable ctx", n)
	}
}
