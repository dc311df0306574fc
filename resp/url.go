package resp

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Config is where and how to connect, as parsed from a URL.
type Config struct {
	Network  string // "tcp" or "unix"
	Addr     string // host:port, or the socket path
	Username string // ACL user; empty means the default user
	Password string
	DB       int
	TLS      bool // rediss://: TLS, verified against Options.TLS or the system roots
}

// ParseURL parses redis://[user:pass@]host[:port][/db] (port defaults to
// 6379, db to 0), rediss://... (the same over TLS) and
// unix://[user:pass@]/path/to/redis.sock[?db=N].
// Errors never echo the URL, since it may carry a password.
func ParseURL(raw string) (Config, error) {
	cfg, err := parseURL(raw)
	if err != nil {
		return Config{}, fmt.Errorf("resp: bad Redis URL: %w", err)
	}
	return cfg, nil
}

func parseURL(raw string) (Config, error) {
	if raw == "" {
		return Config{}, errors.New("empty; want redis://host:port/db or unix:///path/to/redis.sock")
	}
	if !strings.Contains(raw, "://") {
		return Config{}, errors.New("missing scheme; want redis://host:port/db or unix:///path/to/redis.sock")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error quotes the whole URL, password included
		}
		return Config{}, err
	}
	var cfg Config
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		if cfg.Username != "" && cfg.Password == "" {
			return Config{}, errors.New("user name without a password; for a password alone use redis://:PASSWORD@host")
		}
	}
	if u.Fragment != "" {
		return Config{}, errors.New("unexpected #fragment")
	}
	q := u.Query()
	switch u.Scheme {
	case "redis", "rediss":
		cfg.TLS = u.Scheme == "rediss"
		if u.Opaque != "" {
			return Config{}, fmt.Errorf("want %s://host:port/db", u.Scheme)
		}
		if len(q) > 0 {
			return Config{}, fmt.Errorf("unknown query parameters %q (redis:// takes the db from the path)", u.RawQuery)
		}
		host, port := u.Hostname(), u.Port()
		if host == "" {
			return Config{}, errors.New("missing host")
		}
		if port == "" {
			if strings.HasSuffix(u.Host, ":") {
				return Config{}, errors.New("empty port")
			}
			port = "6379"
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return Config{}, fmt.Errorf("port %q out of range 1-65535", port)
		}
		cfg.Network = "tcp"
		cfg.Addr = net.JoinHostPort(host, port)
		if db := strings.TrimPrefix(u.Path, "/"); db != "" {
			if cfg.DB, err = parseDB(db); err != nil {
				return Config{}, err
			}
		}
	case "unix":
		if u.Host != "" {
			return Config{}, fmt.Errorf("unix URL has host %q; want unix:///absolute/path/to/redis.sock", u.Host)
		}
		if u.Path == "" || !strings.HasPrefix(u.Path, "/") {
			return Config{}, errors.New("unix URL needs an absolute socket path: unix:///path/to/redis.sock")
		}
		for k := range q {
			if k != "db" {
				return Config{}, fmt.Errorf("unknown query parameter %q (only db is supported)", k)
			}
		}
		if db, ok := q["db"]; ok {
			if len(db) != 1 {
				return Config{}, errors.New("db given more than once")
			}
			if cfg.DB, err = parseDB(db[0]); err != nil {
				return Config{}, err
			}
		}
		cfg.Network = "unix"
		cfg.Addr = u.Path
	default:
		return Config{}, fmt.Errorf("unsupported scheme %q; want redis://, rediss:// or unix://", u.Scheme)
	}
	return cfg, nil
}

func parseDB(s string) (int, error) {
	db, err := strconv.Atoi(s)
	if err != nil || db < 0 || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("db %q is not a non-negative integer", s)
	}
	return db, nil
}
