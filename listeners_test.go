package main

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/korvet/korvet/engine"
)

// The Kafka listeners' keys: a TLS listener with SASL loads, and each
// mistake is named with its line.
func TestListenerConfig(t *testing.T) {
	dir := t.TempDir()
	cert, key, _ := selfSigned(t, dir)
	good := fmt.Sprintf(`[kafka]
listen = ""
auth = "sasl"
acls = true
super_users = ["User:admin"]
[kafka.tls]
listen = "127.0.0.1:9093"
advertised = "kafka.lan:9093"
auth = "sasl"
cert_file = %q
key_file = %q
`, cert, key)
	c, err := loadConfig(writeConfig(t, good))
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.Listen != "" || c.Kafka.TLS.Listen != "127.0.0.1:9093" || !c.Kafka.ACLs || c.Kafka.SuperUsers[0] != "User:admin" ||
		len(c.Kafka.SASLMechanisms) != 2 || c.Kafka.TLS.Auth != "sasl" {
		t.Errorf("loaded %+v", c.Kafka)
	}

	tests := []struct {
		name, text string
		line       int
		want       string
	}{
		{"no listener", "[kafka]\nlisten = \"\"\n", 2, "kafka.listen"},
		{"bad auth", "[kafka]\nauth = \"password\"\n", 2, "kafka.auth"},
		{"bad tls auth", "[kafka.tls]\nauth = \"mtls\"\n", 2, "kafka.tls.auth"},
		{"bad mechanism", "[kafka]\nsasl_mechanisms = [\"SCRAM-SHA-1\"]\n", 2, "SCRAM-SHA-1"},
		{"twice", "[kafka]\nsasl_mechanisms = [\"PLAIN\", \"PLAIN\"]\n", 2, "twice"},
		{"no mechanism", "[kafka]\nauth = \"sasl\"\nsasl_mechanisms = []\n", 3, "kafka.sasl_mechanisms"},
		{"plain only without TLS", "[kafka]\nauth = \"sasl\"\nsasl_mechanisms = [\"PLAIN\"]\n", 2, "allow_plain_without_tls"},
		{"super user without User:", "[kafka]\nsuper_users = [\"admin\"]\n", 2, "User:admin"},
		{"tls listen", "[kafka.tls]\nlisten = \"9093\"\n", 2, "kafka.tls.listen"},
		{"tls without cert", "[kafka.tls]\nlisten = \"127.0.0.1:9093\"\n", 2, "cert_file"},
		{"tls missing files", "[kafka.tls]\nlisten = \"127.0.0.1:9093\"\ncert_file = \"/nonexistent/c.pem\"\nkey_file = \"/nonexistent/k.pem\"\n", 3, "/nonexistent/c.pem"},
		{"client cert without CA", fmt.Sprintf("[kafka.tls]\nlisten = \"127.0.0.1:9093\"\ncert_file = %q\nkey_file = %q\nrequire_client_cert = true\n", cert, key), 5, "client_ca_file"},
		{"tls advertised", fmt.Sprintf("[kafka.tls]\nlisten = \"127.0.0.1:9093\"\nadvertised = \"lan\"\ncert_file = %q\nkey_file = %q\n", cert, key), 3, "kafka.tls.advertised"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.text)
			_, err := loadConfig(path)
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.text)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("%s:%d:", path, tt.line)) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want line %d and %q", err, tt.line, tt.want)
			}
		})
	}
}

// Both Kafka listeners are named as the engine registers them, each at its
// advertised address, so that other brokers send a client that came in
// over TLS to their TLS listener.
func TestEngineListeners(t *testing.T) {
	dir := t.TempDir()
	cert, key, _ := selfSigned(t, dir)
	c, err := loadConfig(writeConfig(t, fmt.Sprintf(`[kafka]
listen = "127.0.0.1:0"
advertised = "kafka.lan:9092"
[kafka.tls]
listen = "127.0.0.1:0"
cert_file = %q
key_file = %q
`, cert, key)))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := kafkaListeners(c)
	if err != nil {
		t.Fatal(err)
	}
	defer closeListeners(ls)
	got := engineListeners(ls)
	tlsPort := int32(ls[1].Addr().(*net.TCPAddr).Port)
	want := []engine.ListenerAddr{{Name: "PLAINTEXT", Host: "kafka.lan", Port: 9092}, {Name: "TLS", Host: "127.0.0.1", Port: tlsPort}}
	if !slices.Equal(got, want) {
		t.Errorf("engine listeners = %+v, want %+v", got, want)
	}
}
