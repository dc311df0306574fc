package resp_test

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/korvet/korvet/internal/testbed"
	"github.com/korvet/korvet/resp"
)

// Pipelines sent one behind the other on a Conn are answered in order,
// also when one read takes in replies of the next (big values make the
// replies of several pipelines arrive split and merged arbitrarily).
func TestConnSendReceive(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{})
	ctx := ctxT(t)
	cn, err := c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	big := bytes.Repeat([]byte("v"), 100_000)
	const rounds, perRound = 40, 25
	pls := make([]*resp.Pipeline, rounds)
	for r := range rounds {
		pl := &resp.Pipeline{}
		for i := range perRound {
			k := "k" + strconv.Itoa(r*perRound+i)
			pl.Cmd("SET", k, append(big[:i*1000:i*1000], k...))
			pl.Cmd("GET", k)
		}
		pls[r] = pl
	}
	check := func(r int, rs *resp.Replies) {
		t.Helper()
		if rs.Len() != 2*perRound {
			t.Fatalf("round %d: %d replies, want %d", r, rs.Len(), 2*perRound)
		}
		for i := range perRound {
			k := "k" + strconv.Itoa(r*perRound+i)
			if want := append(big[:i*1000:i*1000], k...); !bytes.Equal(rs.At(2*i+1).Bytes(), want) {
				t.Fatalf("round %d: GET %s = %d bytes, want %d", r, k, len(rs.At(2*i+1).Bytes()), len(want))
			}
		}
	}
	// Two in flight at a time, as the flush loop keeps them.
	if err := cn.Send(ctx, pls[0]); err != nil {
		t.Fatal(err)
	}
	for r := 1; r <= rounds; r++ {
		if r < rounds {
			if err := cn.Send(ctx, pls[r]); err != nil {
				t.Fatal(err)
			}
		}
		rs, err := cn.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		check(r-1, rs)
		rs.Release()
	}
	// All sent first, then all received.
	for r := range rounds {
		if err := cn.Send(ctx, pls[r]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cn.Exec(ctx, pls[0]); err == nil {
		t.Fatal("Exec with replies owed: no error")
	}
	for r := range rounds {
		rs, err := cn.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		check(r, rs)
		rs.Release()
	}
	if _, err := cn.Receive(ctx); err == nil {
		t.Fatal("Receive with nothing sent: no error")
	}
	// Nothing owed: the Conn runs plain calls again.
	if r, err := cn.Do(ctx, "GET", "k0"); err != nil || !bytes.Equal(r.Bytes(), []byte("k0")) {
		t.Fatalf("GET k0 after the pipelines: %q, %v", r.Bytes(), err)
	}
}

// A Conn closed with replies still owed is not pooled: the next user of
// the pool must not read them.
func TestConnCloseWithRepliesOwed(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{PoolSize: 1})
	ctx := ctxT(t)
	cn, err := c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pl resp.Pipeline
	for i := range 100 {
		pl.Cmd("SET", fmt.Sprint("owed", i), i)
	}
	pl.Cmd("GET", "owed7")
	if err := cn.Send(ctx, &pl); err != nil {
		t.Fatal(err)
	}
	cn.Close()
	mustDo(t, c, "SET", "after", "x")
	if r := mustDo(t, c, "GET", "after"); string(r.Bytes()) != "x" {
		t.Fatalf("GET after a Conn closed with replies owed: %q, want x", r.Bytes())
	}
	if r := mustDo(t, c, "GET", "owed99"); string(r.Bytes()) != "99" {
		t.Fatalf("what was sent before Close ran: GET owed99 = %q", r.Bytes())
	}
}

// A Send refused before writing leaves nothing owed.
func TestConnSendRefused(t *testing.T) {
	rd := testbed.StartRedis(t)
	c := newClient(t, rd.URL, resp.Options{})
	ctx := ctxT(t)
	cn, err := c.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	var bad resp.Pipeline
	bad.Cmd("SET", "k", struct{}{})
	if err := cn.Send(ctx, &bad); err == nil {
		t.Fatal("Send of a pipeline with an unencodable argument: no error")
	}
	if _, err := cn.Receive(ctx); err == nil || errors.Is(err, resp.ErrClosed) {
		t.Fatalf("Receive after a refused Send: %v, want an error naming nothing sent", err)
	}
	if r, err := cn.Do(ctx, "PING"); err != nil || string(r.Bytes()) != "PONG" {
		t.Fatalf("PING after a refused Send: %q, %v", r.Bytes(), err)
	}
}
