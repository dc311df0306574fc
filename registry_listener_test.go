package main

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/korvet/korvet/internal/testbed"
)

// [schema_registry]: its default, and each mistake named with its key
// and line.
func TestSchemaRegistryConfig(t *testing.T) {
	c, err := loadConfig(writeConfig(t, "log_level = \"info\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.SchemaRegistry.Listen != "127.0.0.1:8081" || c.SchemaRegistry.CertFile != "" || c.SchemaRegistry.KeyFile != "" {
		t.Errorf("defaults: %+v", c.SchemaRegistry)
	}
	dir := t.TempDir()
	cert, key, _ := selfSigned(t, dir)
	for _, ok := range []string{
		"[schema_registry]\nlisten = \"\"\n",
		"[schema_registry]\nlisten = \"localhost:18081\"\n",
		"[http]\nallow_anonymous = true\n[schema_registry]\nlisten = \"0.0.0.0:8081\"\n",
		"[http]\nauth = \"basic\"\n[schema_registry]\nlisten = \"0.0.0.0:8081\"\n",
		fmt.Sprintf("[schema_registry]\ncert_file = %q\nkey_file = %q\n", cert, key),
	} {
		if _, err := loadConfig(writeConfig(t, ok)); err != nil {
			t.Errorf("refused %q: %v", ok, err)
		}
	}

	tests := []struct {
		name, text string
		line       int
		want       []string
	}{
		{"listen without port", "[schema_registry]\nlisten = \"8081\"\n", 2, []string{"schema_registry.listen", "host:port"}},
		{"anonymous on the LAN", "[schema_registry]\nlisten = \"0.0.0.0:8081\"\n", 2, []string{"schema_registry.listen", "allow_anonymous", "http.auth"}},
		{"cert without key", fmt.Sprintf("[schema_registry]\ncert_file = %q\n", cert), 2, []string{"schema_registry.cert_file", "key_file"}},
		{"missing files", "[schema_registry]\ncert_file = \"/nonexistent/c.pem\"\nkey_file = \"/nonexistent/k.pem\"\n", 2, []string{"schema_registry.cert_file", "/nonexistent/c.pem"}},
		{"cert while off", fmt.Sprintf("[schema_registry]\nlisten = \"\"\ncert_file = %q\nkey_file = %q\n", cert, key), 3, []string{"schema_registry.cert_file"}},
		{"unknown key", "[schema_registry]\nport = 8081\n", 2, []string{"schema_registry.port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.text)
			_, err := loadConfig(path)
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.text)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("%s:%d:", path, tt.line)) {
				t.Errorf("error %q, want line %d", err, tt.line)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// A schema registry port already taken stops start-up with an error
// naming the key, rather than korvet running without its registry.
func TestSchemaRegistryBindFailure(t *testing.T) {
	r := testbed.StartRedis(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	path := writeConfig(t, fmt.Sprintf(`data_dir = %q
shutdown_grace = "2s"
[kafka]
listen = "127.0.0.1:%d"
[http]
listen = "127.0.0.1:%d"
[schema_registry]
listen = %q
[redis]
url = %q
`, t.TempDir(), testbed.FreePort(t), testbed.FreePort(t), taken.Addr().String(), r.URL))
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"serve", "--config", path}, &stdout, &stderr) }()
	select {
	case code := <-done:
		if code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve still running 30s after start with its registry port taken; stderr:\n%s", stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "schema_registry.listen") || !strings.Contains(msg, taken.Addr().String()) {
		t.Errorf("stderr does not name schema_registry.listen and %s:\n%s", taken.Addr(), msg)
	}
}
