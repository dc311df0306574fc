package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/korvet/korvet/engine"
	"github.com/korvet/korvet/resp"
)

// Config is korvet.toml. Every key is documented in README.md with its
// default; defaults live in defaultConfig.
type Config struct {
	DataDir  string `toml:"data_dir"`
	LogLevel string `toml:"log_level"`
	Kafka    struct {
		Listen            string `toml:"listen"`
		Advertised        string `toml:"advertised"`
		NodeID            int32  `toml:"node_id"`
		AutoCreateTopics  bool   `toml:"auto_create_topics"`
		DefaultPartitions int32  `toml:"default_partitions"`
		MaxRequestBytes   int32  `toml:"max_request_bytes"`
		MaxConnections    int    `toml:"max_connections"`
	} `toml:"kafka"`
	HTTP struct {
		Listen string `toml:"listen"`
	} `toml:"http"`
	Redis struct {
		URL      string   `toml:"url"`
		Keyspace string   `toml:"keyspace"`
		PoolSize int      `toml:"pool_size"`
		Timeout  duration `toml:"timeout"`
	} `toml:"redis"`
	TopicDefaults map[string]string `toml:"topic_defaults"`
	ShutdownGrace duration          `toml:"shutdown_grace"`
}

type duration struct{ time.Duration }

func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("bad duration %q (use e.g. \"10s\", \"500ms\")", b)
	}
	d.Duration = v
	return nil
}

func defaultConfig() Config {
	var c Config
	c.DataDir = "/var/lib/korvet"
	c.LogLevel = "info"
	c.Kafka.Listen = "0.0.0.0:9092"
	c.Kafka.AutoCreateTopics = true
	c.Kafka.DefaultPartitions = 1
	c.Kafka.MaxRequestBytes = 100 << 20
	c.Kafka.MaxConnections = 10000
	c.HTTP.Listen = "127.0.0.1:8080"
	c.Redis.URL = "redis://127.0.0.1:6379/0"
	c.Redis.Keyspace = "korvet"
	c.Redis.PoolSize = 16
	c.Redis.Timeout.Duration = 10 * time.Second
	c.ShutdownGrace.Duration = 10 * time.Second
	return c
}

// loadConfig reads path over the defaults. Any unknown key or bad value is
// an error naming the file, the line and the key.
func loadConfig(path string) (Config, error) {
	c := defaultConfig()
	text, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	md, err := toml.Decode(string(text), &c)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return c, fmt.Errorf("%s:%d: %s", path, perr.Position.Line, perr.Message)
		}
		return c, fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range md.Undecoded() {
		key := k.String()
		if len(k) == 2 && k[0] == "topic_defaults" {
			continue // checked below, with the topic-config rules
		}
		return c, fmt.Errorf("%s:%d: unknown key %q (see README.md for the keys korvet knows)", path, keyLine(text, k), key)
	}
	bad := func(k toml.Key, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s: %s", path, keyLine(text, k), k.String(), fmt.Sprintf(format, args...))
	}
	for name, v := range c.TopicDefaults {
		d, ok := engine.LookupConfig(name)
		if !ok {
			return c, bad(toml.Key{"topic_defaults", name}, "unknown topic config")
		}
		if err := d.Check(v); err != nil {
			return c, bad(toml.Key{"topic_defaults", name}, "%v", err)
		}
	}
	if _, _, err := net.SplitHostPort(c.Kafka.Listen); err != nil {
		return c, bad(toml.Key{"kafka", "listen"}, "want host:port, got %q", c.Kafka.Listen)
	}
	if c.Kafka.Advertised != "" {
		if _, _, err := net.SplitHostPort(c.Kafka.Advertised); err != nil {
			return c, bad(toml.Key{"kafka", "advertised"}, "want host:port, got %q", c.Kafka.Advertised)
		}
	}
	if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
		return c, bad(toml.Key{"http", "listen"}, "want host:port, got %q", c.HTTP.Listen)
	}
	if _, err := resp.ParseURL(c.Redis.URL); err != nil {
		return c, bad(toml.Key{"redis", "url"}, "%v", err)
	}
	if c.Redis.Keyspace == "" || strings.ContainsAny(c.Redis.Keyspace, " \t\r\n") {
		return c, bad(toml.Key{"redis", "keyspace"}, "must be non-empty without spaces")
	}
	if c.Redis.PoolSize < 1 || c.Redis.PoolSize > 1024 {
		return c, bad(toml.Key{"redis", "pool_size"}, "must be 1 to 1024")
	}
	if c.Redis.Timeout.Duration <= 0 {
		return c, bad(toml.Key{"redis", "timeout"}, "must be positive")
	}
	if c.Kafka.DefaultPartitions < 1 {
		return c, bad(toml.Key{"kafka", "default_partitions"}, "must be at least 1")
	}
	if c.Kafka.MaxRequestBytes < 1024 {
		return c, bad(toml.Key{"kafka", "max_request_bytes"}, "must be at least 1024")
	}
	if c.Kafka.MaxConnections < 1 {
		return c, bad(toml.Key{"kafka", "max_connections"}, "must be at least 1")
	}
	if c.Kafka.NodeID < 0 {
		return c, bad(toml.Key{"kafka", "node_id"}, "must be >= 0")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return c, bad(toml.Key{"log_level"}, "must be debug, info, warn or error")
	}
	if c.DataDir == "" {
		return c, bad(toml.Key{"data_dir"}, "must not be empty")
	}
	return c, nil
}

// keyLine finds the line where key is set, for error messages; 0 when it
// cannot tell.
func keyLine(text []byte, key toml.Key) int {
	table := ""
	want := strings.Join(key[:len(key)-1], ".")
	last := key[len(key)-1]
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") && !strings.HasPrefix(line, "[[") {
			table = strings.Trim(strings.TrimSpace(strings.Trim(line, "[]")), " ")
			continue
		}
		name, _, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		name = strings.Trim(strings.TrimSpace(name), `"'`)
		full := name
		if table != "" {
			full = table + "." + name
		}
		if table == want && name == last || full == key.String() {
			return n
		}
	}
	return 0
}

// advertised returns the host:port clients are told to use: the
// configured one, or listen with an unspecified host replaced by this
// machine's first non-loopback address.
func (c *Config) advertised() (string, int32, error) {
	a := c.Kafka.Advertised
	if a == "" {
		a = c.Kafka.Listen
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "", 0, err
	}
	var p int32
	if _, err := fmt.Sscanf(port, "%d", &p); err != nil {
		return "", 0, fmt.Errorf("bad port %q", port)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = firstLANAddress()
	}
	return host, p, nil
}

func firstLANAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
