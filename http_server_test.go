package main

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// The [http] limits: defaults, and a bad value names its key and line.
func TestHTTPLimitsConfig(t *testing.T) {
	c, err := loadConfig(writeConfig(t, "[http]\nmax_connections = 3\nwrite_timeout = \"5m\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	hs := newHTTPServer(c, nil)
	if hs.ReadHeaderTimeout != 10*time.Second || hs.ReadTimeout != 30*time.Second || hs.WriteTimeout != 5*time.Minute ||
		hs.IdleTimeout != 2*time.Minute || hs.MaxHeaderBytes != httpMaxHeaderBytes || c.HTTP.MaxConnections != 3 || c.HTTP.KVMgetMaxBytes != 16<<20 {
		t.Fatalf("server %+v from config %+v", hs, c.HTTP)
	}
	for text, want := range map[string]string{
		"[http]\nread_header_timeout = \"0s\"\n":                        ":2: http.read_header_timeout: must be 100ms to 24h",
		"[http]\nread_timeout = \"48h\"\n":                              ":2: http.read_timeout: must be 100ms to 24h",
		"[http]\nwrite_timeout = \"-1s\"\n":                             ":2: http.write_timeout",
		"[http]\nidle_timeout = \"1ms\"\n":                              ":2: http.idle_timeout",
		"[http]\nread_timeout = \"5s\"\nread_header_timeout = \"6s\"\n": ":3: http.read_header_timeout: must not be longer than http.read_timeout",
		"[http]\nmax_connections = 0\n":                                 ":2: http.max_connections: must be 1 to",
		"[http]\nkv_mget_max_bytes = 100\n":                             ":2: http.kv_mget_max_bytes: must be 1024 to",
		"[http]\nkv_mget_max_bytes = 2147483648\n":                      ":2: http.kv_mget_max_bytes",
		"[http]\nidle_timeout = 10\n":                                   "idle_timeout",
	} {
		_, err := loadConfig(writeConfig(t, text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: %v, want an error with %q", text, err, want)
		}
	}
}

// limitListener holds at most n connections: the next one is accepted
// only once one of them closes, and Close wakes a waiting Accept.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitListener(inner, 2)
	accepted := make(chan net.Conn, 10)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	var held []net.Conn
	for range 2 {
		select {
		case c := <-accepted:
			held = append(held, c)
		case <-time.After(10 * time.Second):
			t.Fatal("the first two connections were not accepted")
		}
	}
	// The third waits in the kernel's queue while two are open...
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted with the limit at 2")
	case <-time.After(200 * time.Millisecond): // not accepted for a while: nothing to wait for but time
	}
	// ...and is accepted once one closes (twice: the token comes back once).
	held[0].Close()
	held[0].Close()
	select {
	case c := <-accepted:
		held = append(held, c)
	case <-time.After(10 * time.Second):
		t.Fatal("the third connection was not accepted after one closed")
	}
	select {
	case <-accepted:
		t.Fatal("a double Close gave back two tokens")
	case <-time.After(200 * time.Millisecond): // not accepted for a while: nothing to wait for but time
	}
	// Close stops an Accept waiting for a token.
	ln.Close()
	select {
	case err := <-acceptErr:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
	for _, c := range held[1:] {
		c.Close()
	}
}
