package resp

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url     string
		want    Config
		wantErr string // substring of the error; "" means success
	}{
		{url: "redis://127.0.0.1:6380/0", want: Config{Network: "tcp", Addr: "127.0.0.1:6380"}},
		{url: "redis://localhost", want: Config{Network: "tcp", Addr: "localhost:6379"}},
		{url: "redis://localhost/", want: Config{Network: "tcp", Addr: "localhost:6379"}},
		{url: "redis://h:1/15", want: Config{Network: "tcp", Addr: "h:1", DB: 15}},
		{url: "redis://[::1]:7000/2", want: Config{Network: "tcp", Addr: "[::1]:7000", DB: 2}},
		{url: "redis://:s3cret@h:6379/1", want: Config{Network: "tcp", Addr: "h:6379", Password: "s3cret", DB: 1}},
		{url: "redis://alice:p%40ss@h", want: Config{Network: "tcp", Addr: "h:6379", Username: "alice", Password: "p@ss"}},
		{url: "unix:///run/redis.sock", want: Config{Network: "unix", Addr: "/run/redis.sock"}},
		{url: "unix:///run/redis.sock?db=3", want: Config{Network: "unix", Addr: "/run/redis.sock", DB: 3}},
		{url: "unix://:pw@/run/redis.sock", want: Config{Network: "unix", Addr: "/run/redis.sock", Password: "pw"}},
		{url: "unix://bob:pw@/tmp/r.sock?db=1", want: Config{Network: "unix", Addr: "/tmp/r.sock", Username: "bob", Password: "pw", DB: 1}},

		{url: "", wantErr: "empty"},
		{url: "127.0.0.1:6379", wantErr: "missing scheme"},
		{url: "http://h:6379", wantErr: `unsupported scheme "http"`},
		{url: "rediss://:pw@h:6380/0", want: Config{Network: "tcp", Addr: "h:6380", Password: "pw", TLS: true}},
		{url: "rediss://h", want: Config{Network: "tcp", Addr: "h:6379", TLS: true}},
		{url: "redis://", wantErr: "missing host"},
		{url: "redis://:6379", wantErr: "missing host"},
		{url: "redis://h:0", wantErr: "out of range"},
		{url: "redis://h:99999", wantErr: "out of range"},
		{url: "redis://h:", wantErr: "empty port"},
		{url: "redis://h:abc", wantErr: "invalid port"},
		{url: "redis://h/x", wantErr: `db "x"`},
		{url: "redis://h/-1", wantErr: `db "-1"`},
		{url: "redis://h/1/2", wantErr: `db "1/2"`},
		{url: "redis://h/0?db=1", wantErr: "unknown query"},
		{url: "redis://alice@h", wantErr: "user name without a password"},
		{url: "unix://tmp/redis.sock", wantErr: `has host "tmp"`},
		{url: "unix://", wantErr: "absolute socket path"},
		{url: "unix:///r.sock?db=z", wantErr: `db "z"`},
		{url: "unix:///r.sock?timeout=1", wantErr: `unknown query parameter "timeout"`},
		{url: "unix:///r.sock?db=1&db=2", wantErr: "more than once"},
		{url: "redis://:hunter2@h:6379/0#x", wantErr: "fragment"},
		{url: "redis://:hunter2@h%zz:6379", wantErr: "invalid URL escape"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, err := ParseURL(tt.url)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseURL(%q) = %+v, want error containing %q", tt.url, got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseURL(%q) error %q, want it to contain %q", tt.url, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error leaks the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tt.url, err)
			}
			if got != tt.want {
				t.Fatalf("ParseURL(%q) = %+v, want %+v", tt.url, got, tt.want)
			}
		})
	}
}

func TestNewValidatesURL(t *testing.T) {
	if _, err := New("redis://h:notaport", Options{}); err == nil {
		t.Fatal("New accepted a bad URL")
	}
	c, err := New("redis://127.0.0.1:1/0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.opts.PoolSize != DefaultPoolSize || c.opts.MaxReplyBytes != DefaultMaxReplyBytes ||
		c.opts.Timeout != DefaultTimeout || c.opts.DialTimeout != DefaultDialTimeout {
		t.Fatalf("defaults not applied: %+v", c.opts)
	}
}
