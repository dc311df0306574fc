package kafkawire_test

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/internal/testbed"
)

// A drain closes a connection that has had no answer yet with a reset,
// which clients retry, and not with a clean close, which franz-go takes
// for a TLS or SASL mismatch and fails the records on (ErrFirstReadEOF).
// A connection that has been answered closes cleanly.
func TestDrainResetsUnansweredConnections(t *testing.T) {
	b := startBroker(t, engine.Options{})
	answered := dialAnswered(t, b.addr)
	silent, err := net.DialTimeout("tcp", b.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	testbed.WaitFor(t, 10*time.Second, "both connections served", func() bool { return b.srv.Connected.Load() == 2 })
	b.stop()

	_ = silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("unanswered connection: read %v, want a connection reset", err)
	}
	_ = answered.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := answered.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("answered connection: read %v, want EOF", err)
	}
}

// dialAnswered opens a connection, has its ApiVersions answered, and leaves it open.
func dialAnswered(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "drain-test", "1"
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(request(1, req)); err != nil {
		t.Fatal(err)
	}
	readResponse(t, c, req)
	_ = c.SetDeadline(time.Time{})
	return c
}
