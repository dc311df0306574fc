package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// The admin commands talk to a running korvet's admin API (/api/v1): over
// its unix socket in data_dir when this user can open it (the local
// administrator, no login), else over HTTP with --url or [http] listen,
// logged in with --user (HTTP Basic, a SCRAM user) or a bearer token.

// defaultConfigPath is read when --config is not given and it exists.
const defaultConfigPath = "/etc/korvet/korvet.toml"

// maxResponse bounds what the CLI reads of one answer.
const maxResponse = 64 << 20

// cliEnv is what an admin command reads and writes besides its flags.
type cliEnv struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// adminConn is a korvet to send admin requests to.
type adminConn struct {
	base   string // http://host:port, no trailing slash
	hc     *http.Client
	auth   string // Authorization header value, "" for none
	output string // table or json (or names, for topics list)
}

// apiError is a non-2xx answer of the admin API.
type apiError struct {
	status  int
	code    string // the body's "error" (a kafka error name or a korvet code)
	message string
}

func (e *apiError) Error() string {
	switch {
	case e.message != "":
		return e.message
	case e.code != "":
		return e.code
	}
	return fmt.Sprintf("HTTP %d", e.status)
}

// unreachableError: no korvet answered at all (exit code 5).
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// exitCode maps an admin command's error to its documented exit code.
func exitCode(err error) int {
	var ue usageError
	var ae *apiError
	var re *unreachableError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &re):
		return exitUnreachable
	case errors.As(err, &ae):
		switch ae.status {
		case http.StatusNotFound:
			return exitNotFound
		case http.StatusUnauthorized, http.StatusForbidden:
			return exitNotAllowed
		}
	}
	return exitFailed
}

// connect finds the korvet to talk to and the credentials to show it.
func connect(a cliArgs, env cliEnv, outputs ...string) (*adminConn, error) {
	c := &adminConn{output: "table"}
	if a.has("output") {
		c.output = a.str("output")
	}
	if outputs = append(outputs, "table", "json"); !slices.Contains(outputs, c.output) {
		return nil, usagef("--output %q: use %s", c.output, strings.Join(outputs, " or "))
	}
	viaSocket := false
	var cfgToken string
	if u := a.str("url"); u != "" {
		pu, err := url.Parse(u)
		if err != nil || pu.Scheme != "http" && pu.Scheme != "https" || pu.Host == "" {
			return nil, usagef("--url %q: want http(s)://host:port", u)
		}
		c.base = strings.TrimSuffix(pu.Scheme+"://"+pu.Host+pu.Path, "/")
		c.hc = &http.Client{Timeout: 30 * time.Second}
	} else {
		cfg := defaultConfig()
		path := a.str("config")
		if path == "" {
			if _, err := os.Stat(defaultConfigPath); err == nil {
				path = defaultConfigPath
			}
		}
		if path != "" {
			var err error
			if cfg, err = loadConfig(path); err != nil {
				return nil, usagef("%v", err)
			}
		}
		var err error
		if c.base, c.hc, err = adminClient(cfg); err != nil {
			return nil, usagef("[http] listen: %v", err)
		}
		viaSocket = socketExists(cfg)
		if viaSocket && socketRefused(adminSocket(cfg)) {
			// Another user's socket (it is korvet's, mode 0600): log in
			// over HTTP instead.
			viaSocket = false
			if c.base, c.hc, err = httpAdminClient(cfg); err != nil {
				return nil, usagef("[http] listen: %v", err)
			}
		}
		cfgToken = cfg.HTTP.AdminToken
	}
	token := a.str("token")
	if token == "" {
		token = env.getenv("KORVET_ADMIN_TOKEN")
	}
	switch {
	case a.str("user") != "":
		pw := env.getenv("KORVET_PASSWORD")
		if pw == "" {
			var err error
			if pw, err = askLoginPassword(env, a.str("user")); err != nil {
				return nil, err
			}
		}
		c.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(a.str("user")+":"+pw))
	case token != "":
		c.auth = "Bearer " + token
	case !viaSocket && cfgToken != "":
		// Whoever can read korvet.toml holds its admin token anyway.
		c.auth = "Bearer " + cfgToken
	}
	return c, nil
}

// askLoginPassword asks on the terminal; without one KORVET_PASSWORD must
// be set (a password is never taken from the command line, where ps shows it).
func askLoginPassword(env cliEnv, user string) (string, error) {
	if f, ok := env.stdin.(*os.File); ok {
		pw, isTerm, err := readHidden(f, env.stderr, "Password for "+user+": ", "")
		if isTerm {
			return pw, err
		}
	}
	return "", usagef("--user %s: set KORVET_PASSWORD or run on a terminal to be asked the password", user)
}

// call sends one request and decodes a 2xx answer's JSON into out (when
// not nil); it returns the raw body too, for --output json.
func (c *adminConn) call(ctx context.Context, method, path string, query url.Values, body, out any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, &unreachableError{fmt.Errorf("no korvet answers at %s: %w", c.shownBase(), err)}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponse+1))
	if err != nil {
		return nil, &unreachableError{fmt.Errorf("%s %s: read answer: %w", method, path, err)}
	}
	if len(raw) > maxResponse {
		return nil, fmt.Errorf("%s %s: answer larger than %d MiB", method, path, maxResponse>>20)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return raw, decodeAPIError(res, raw, path)
	}
	if out != nil && len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("%s %s: unexpected answer: %w", method, path, err)
		}
	}
	return raw, nil
}

// decodeAPIError reads the API's {"error","message"} body; older routes
// answer {"error":"message"} and a korvet without a route answers text.
func decodeAPIError(res *http.Response, raw []byte, path string) error {
	e := &apiError{status: res.StatusCode}
	var body struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(raw, &body)
	if body.Error == "no_such_route" || body.Error == "method_not_allowed" {
		return fmt.Errorf("this korvet does not serve %s %s (%s): is it older than this korvet command?", res.Request.Method, path, res.Status)
	}
	if body.Error != "" || body.Message != "" {
		e.code, e.message = body.Error, body.Message
		return e
	}
	if res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed {
		// Not the API's answer: this korvet predates the route.
		return fmt.Errorf("this korvet does not serve %s %s (%s): is it older than this korvet command?", res.Request.Method, path, res.Status)
	}
	text := strings.TrimSpace(string(raw))
	if len(text) > 500 {
		text = text[:500] + "..."
	}
	e.message = strings.TrimSpace(res.Status + ": " + text)
	return e
}

// shownBase names the korvet for messages.
func (c *adminConn) shownBase() string {
	if c.base == "http://korvet" {
		return "the admin socket"
	}
	return c.base
}

// socketRefused tells whether this user may not connect to the socket.
func socketRefused(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return errors.Is(err, os.ErrPermission)
	}
	c.Close()
	return false
}
