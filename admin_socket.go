package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/korvet/korvet/web"
)

// adminSocket is the unix socket a running korvet serves its HTTP API on,
// for local administration without a token.
func adminSocket(cfg Config) string { return filepath.Join(cfg.DataDir, "korvet.sock") }

func socketExists(cfg Config) bool {
	fi, err := os.Stat(adminSocket(cfg))
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// adminClient reaches the running korvet: over its unix socket when this
// user can open it (no token needed), else over [http] listen.
func adminClient(cfg Config) (string, *http.Client, error) {
	if socketExists(cfg) {
		sock := adminSocket(cfg)
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}
		return "http://korvet", &http.Client{Timeout: 10 * time.Second, Transport: tr}, nil
	}
	return httpAdminClient(cfg)
}

// httpAdminClient reaches the running korvet over [http] listen.
func httpAdminClient(cfg Config) (string, *http.Client, error) {
	host, port, err := net.SplitHostPort(cfg.HTTP.Listen)
	if err != nil {
		return "", nil, err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), &http.Client{Timeout: 10 * time.Second}, nil
}

// serveAdminSocket serves h on a unix socket readable by korvet's user
// only; requests on it count as the local administrator's.
func serveAdminSocket(path string, h http.Handler, log *slog.Logger) (*http.Server, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		// Left by a korvet that did not stop cleanly: nothing else can
		// hold it, as the index lock in the same data_dir says.
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	us := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnContext: func(ctx context.Context, _ net.Conn) context.Context { return web.LocalAdmin(ctx) }}
	go func() {
		if err := us.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin socket", "err", err)
		}
	}()
	return us, nil
}
