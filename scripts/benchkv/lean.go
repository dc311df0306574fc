package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// leanConn is the load generator's HTTP client: one keep-alive HTTP/1.1
// connection, a GET written in one write and its answer read with a
// reused buffer, no allocation per request. net/http's client costs
// several times the CPU of a small answer (its transport runs a read and
// a write goroutine per connection and allocates the whole response), which
// on a 2-core box is taken from the server measured and shows in its
// latency; this one costs little more than the two syscalls. It needs
// Content-Length answers (korvet's and the reference handler's are).
type leanConn struct {
	host    string // host:port
	nc      net.Conn
	br      *bufio.Reader
	req     []byte
	body    []byte
	timeout time.Duration
}

func newLeanConn(base string, timeout time.Duration) (*leanConn, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", base, err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("%s: the lean client speaks plain http only", base)
	}
	return &leanConn{host: u.Host, timeout: timeout}, nil
}

// get sends GET path and reads the answer: its status and body size.
func (c *leanConn) get(path string) (status, size int, err error) {
	if c.nc == nil {
		nc, err := net.DialTimeout("tcp", c.host, c.timeout)
		if err != nil {
			return 0, 0, fmt.Errorf("dial %s: %w", c.host, err)
		}
		c.nc, c.br = nc, bufio.NewReaderSize(nc, 16<<10)
	}
	status, size, keep, err := c.roundTrip(path)
	if err != nil || !keep {
		c.nc.Close()
		c.nc = nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("GET %s from %s: %w", path, c.host, err)
	}
	return status, size, nil
}

func (c *leanConn) roundTrip(path string) (status, size int, keep bool, err error) {
	if err := c.nc.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, 0, false, err
	}
	c.req = append(c.req[:0], "GET "...)
	c.req = append(c.req, path...)
	c.req = append(c.req, " HTTP/1.1\r\nHost: "...)
	c.req = append(c.req, c.host...)
	c.req = append(c.req, "\r\n\r\n"...)
	if _, err := c.nc.Write(c.req); err != nil {
		return 0, 0, false, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, 0, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, 0, false, fmt.Errorf("bad status line %q", line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, 0, false, fmt.Errorf("bad status line %q", line)
	}
	size, keep = -1, true
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, 0, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, 0, false, fmt.Errorf("bad header line %q", line)
		}
		val = bytes.TrimSpace(val)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if size, err = strconv.Atoi(string(val)); err != nil || size < 0 {
				return 0, 0, false, fmt.Errorf("bad Content-Length %q", val)
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(val, []byte("close")):
			keep = false
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, 0, false, fmt.Errorf("answer with Transfer-Encoding %q: the lean client reads Content-Length only", val)
		}
	}
	if size < 0 {
		return 0, 0, false, fmt.Errorf("answer %d without Content-Length", status)
	}
	if cap(c.body) < size {
		c.body = make([]byte, size)
	}
	if _, err := io.ReadFull(c.br, c.body[:size]); err != nil {
		return 0, 0, false, err
	}
	return status, size, keep, nil
}

func (c *leanConn) close() {
	if c.nc != nil {
		c.nc.Close()
		c.nc = nil
	}
}
