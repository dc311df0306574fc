package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestParseArgsFlagsAfterPositionals(t *testing.T) {
	known := map[string]flagKind{"partitions": flagString, "topic-config": flagList, "dry-run": flagBool}
	a, err := parseArgs([]string{"orders", "--partitions", "3", "--topic-config", "retention.ms=1", "--dry-run",
		"--topic-config=cleanup.policy=compact", "--output=json", "--", "--not-a-flag"}, known)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.pos, []string{"orders", "--not-a-flag"}) {
		t.Errorf("positionals %q", a.pos)
	}
	if a.str("partitions") != "3" || a.str("output") != "json" || !a.flag("dry-run") {
		t.Errorf("values %v", a.vals)
	}
	kv, err := a.keyValues("topic-config")
	if err != nil || !reflect.DeepEqual(kv, map[string]string{"retention.ms": "1", "cleanup.policy": "compact"}) {
		t.Errorf("topic-config %v, %v", kv, err)
	}
	// A value that looks like a flag is a value when the flag wants one.
	a, err = parseArgs([]string{"t", "--before", "-1"}, map[string]flagKind{"before": flagString})
	if err != nil || a.str("before") != "-1" || len(a.pos) != 1 {
		t.Errorf("--before -1: %v %v %v", a.vals, a.pos, err)
	}
	if a, _ := parseArgs([]string{"-", "-x=1"}, map[string]flagKind{"x": flagString}); !reflect.DeepEqual(a.pos, []string{"-"}) || a.str("x") != "1" {
		t.Errorf("lone dash / single-dash flag: %v %v", a.pos, a.vals)
	}
}

func TestParseArgsErrors(t *testing.T) {
	known := map[string]flagKind{"partitions": flagString, "dry-run": flagBool}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"t", "--bogus"}, "unknown flag --bogus"},
		{[]string{"t", "--partitions"}, "needs a value"},
		{[]string{"--dry-run=maybe"}, "want true or false"},
		{[]string{"--partitions", "1", "--partitions", "2"}, "given twice"},
		{[]string{"--=x"}, "unknown flag"},
	} {
		_, err := parseArgs(tc.args, known)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseArgs(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if _, err := parseArgs([]string{"t", "--help"}, known); err != errHelp {
		t.Errorf("--help: %v", err)
	}
}

func TestExitCodeMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{usagef("bad"), 2},
		{fmt.Errorf("wrapped: %w", usagef("bad")), 2},
		{&apiError{status: 404}, 3},
		{&apiError{status: 401}, 4},
		{&apiError{status: 403}, 4},
		{fmt.Errorf("SCRAM-SHA-256: %w", &apiError{status: 403}), 4},
		{&apiError{status: 409}, 1},
		{&apiError{status: 400}, 1},
		{&apiError{status: 500}, 1},
		{&apiError{status: 503}, 1},
		{&unreachableError{errors.New("connection refused")}, 5},
		{errors.New("anything else"), 1},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestResetTargetAndPartitions(t *testing.T) {
	for to, want := range map[string]map[string]any{
		"earliest":                       {"to": "earliest"},
		"latest":                         {"to": "latest"},
		"offset:42":                      {"to": "offset", "offset": int64(42)},
		"timestamp:1700000000000":        {"to": "timestamp", "timestamp": int64(1700000000000)},
		"timestamp:2023-11-14T22:13:20Z": {"to": "timestamp", "timestamp": int64(1700000000000)},
	} {
		got, err := resetTarget(to)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("resetTarget(%q) = %v, %v; want %v", to, got, err, want)
		}
	}
	for _, bad := range []string{"", "earliest:1", "offset:", "offset:-1", "timestamp:yesterday", "first"} {
		if _, err := resetTarget(bad); exitCode(err) != exitUsage {
			t.Errorf("resetTarget(%q) = %v, want a usage error", bad, err)
		}
	}
	if ps, err := parsePartitions("0, 2,5"); err != nil || !reflect.DeepEqual(ps, []int32{0, 2, 5}) {
		t.Errorf("parsePartitions = %v, %v", ps, err)
	}
	for _, bad := range []string{"", "1,", "a", "-1", "99999999999"} {
		if _, err := parsePartitions(bad); err == nil {
			t.Errorf("parsePartitions(%q) passed", bad)
		}
	}
}

// runCLI runs the command line in process with env vars from env.
func runCLI(env map[string]string, args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = runAdminOrCompletion(args, strings.NewReader(""), &o, &e, func(k string) string { return env[k] })
	return o.String(), e.String(), code
}

func runAdminOrCompletion(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if args[0] == "completion" {
		return runCompletion(args[1:], stdout, stderr)
	}
	return runAdmin(args[0], args[1:], cliEnv{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv})
}

// TestCLIUsageErrors: command lines korvet cannot act on exit 2 before
// any connection is tried (the URL below has nothing listening).
func TestCLIUsageErrors(t *testing.T) {
	dead := "http://" + deadAddr(t)
	for _, args := range [][]string{
		{"topics"},
		{"topics", "frobnicate"},
		{"topics", "create", "--url", dead},
		{"topics", "create", "a", "b", "--url", dead},
		{"topics", "create", "a", "--partitions", "zero", "--url", dead},
		{"topics", "create", "a", "--bogus", "--url", dead},
		{"topics", "alter", "a", "--url", dead},
		{"topics", "alter", "a", "--set", "novalue", "--url", dead},
		{"topics", "delete-records", "a", "--partition", "0", "--url", dead},
		{"topics", "tail", "a", "--limit", "1000", "--url", dead},
		{"topics", "list", "--output", "yaml", "--url", dead},
		{"topics", "list", "--url", "ftp://x"},
		{"groups", "reset-offsets", "g", "--topic", "t", "--to", "yesterday", "--url", dead},
		{"groups", "reset-offsets", "g", "--to", "earliest", "--url", dead},
		{"groups", "describe", "--url", dead},
		{"acls", "delete", "--url", dead},
		{"acls", "delete", "--all", "--topic", "t", "--url", dead},
		{"acls", "create", "--principal", "User:a", "--operation", "read", "--url", dead},
		{"acls", "create", "--principal", "User:a", "--operation", "read", "--topic", "t", "--group", "g", "--url", dead},
		{"acls", "list", "--allow", "--deny", "--url", dead},
		{"users", "set", "--url", dead},
		{"users", "set", "bob", "--mechanism", "MD5", "--url", dead},
		{"users", "delete", "bob", "extra", "--url", dead},
		{"completion", "tcsh"},
		{"completion"},
	} {
		_, stderr, code := runCLI(map[string]string{"KORVET_PASSWORD": "pw"}, args...)
		if code != exitUsage {
			t.Errorf("korvet %s: exit %d, want 2 (stderr %q)", strings.Join(args, " "), code, stderr)
		}
		if stderr == "" {
			t.Errorf("korvet %s: nothing on stderr", strings.Join(args, " "))
		}
	}
	for _, args := range [][]string{{"topics", "--help"}, {"groups", "help"}, {"acls", "create", "--help"}, {"completion", "--help"}} {
		stdout, _, code := runCLI(nil, args...)
		if code != 0 || !strings.Contains(stdout, "usage") {
			t.Errorf("korvet %s: exit %d, stdout %q", strings.Join(args, " "), code, stdout)
		}
	}
	if stdout, _, _ := runCLI(nil, "topics", "--help"); !strings.Contains(stdout, "Exit codes") || !strings.Contains(stdout, "add-partitions NAME --count N") {
		t.Errorf("topics --help lacks the verbs or exit codes:\n%s", stdout)
	}
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestCLIUnreachableExits5(t *testing.T) {
	_, stderr, code := runCLI(nil, "topics", "list", "--url", "http://"+deadAddr(t))
	if code != exitUnreachable || !strings.Contains(stderr, "no korvet answers") {
		t.Errorf("--url to nothing: exit %d, stderr %q", code, stderr)
	}
	// Through a config: no admin socket in its data_dir, nothing on [http] listen.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "korvet.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("data_dir = %q\nhttp.listen = %q\n", dir, deadAddr(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(nil, "groups", "list", "--config", cfg); code != exitUnreachable {
		t.Errorf("--config of a stopped korvet: exit %d, stderr %q", code, stderr)
	}
	// A config that cannot be read is a usage error.
	if _, _, code := runCLI(nil, "groups", "list", "--config", filepath.Join(dir, "missing.toml")); code != exitUsage {
		t.Errorf("--config missing: exit %d, want 2", code)
	}
}

// fakeAPI answers each request with the next canned answer and records
// what the CLI sent: the CLI's side of the admin API contract.
type fakeAPI struct {
	mu      sync.Mutex
	status  int
	body    string
	got     []string // "METHOD path?query body"
	headers []http.Header
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.got = append(f.got, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(b)))
	f.headers = append(f.headers, r.Header.Clone())
	status, body := f.status, f.body
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func TestCLISendsTheContract(t *testing.T) {
	f := &fakeAPI{status: 200, body: `{}`}
	srv := httptest.NewServer(f)
	defer srv.Close()
	u := srv.URL
	env := map[string]string{"KORVET_PASSWORD": "s3cret", "KORVET_NEW_PASSWORD": "n3w"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topics", "create", "orders", "--partitions", "3", "--topic-config", "retention.ms=1000", "--replication-factor", "3"},
			`POST /api/v1/topics {"configs":{"retention.ms":"1000"},"name":"orders","partitions":3}`},
		{[]string{"topics", "create", "orders"}, `POST /api/v1/topics {"name":"orders"}`},
		{[]string{"topics", "describe", "orders"}, `GET /api/v1/topics/orders`},
		{[]string{"topics", "delete", "orders"}, `DELETE /api/v1/topics/orders`},
		{[]string{"topics", "alter", "orders", "--set", "retention.ms=5", "--delete", "cleanup.policy", "--dry-run"},
			`PATCH /api/v1/topics/orders/configs?validate_only=true {"delete":["cleanup.policy"],"set":{"retention.ms":"5"}}`},
		{[]string{"topics", "add-partitions", "orders", "--count", "6"}, `POST /api/v1/topics/orders/partitions {"count":6}`},
		{[]string{"topics", "delete-records", "orders", "--partition", "2", "--before", "-1"},
			`POST /api/v1/topics/orders/delete-records {"partitions":[{"before":-1,"partition":2}]}`},
		{[]string{"topics", "produce", "orders", "--value", "v", "--key", "k", "--header", "h=1"},
			`POST /api/v1/topics/orders/records {"encoding":"text","headers":[{"key":"h","value":"1"}],"key":"k","partition":-1,"value":"v"}`},
		{[]string{"topics", "tail", "orders", "--limit", "5", "--partition", "1"}, `GET /api/v1/topics/orders/records?limit=5&partition=1`},
		{[]string{"groups", "describe", "g/1"}, `GET /api/v1/groups/g%2F1`},
		{[]string{"groups", "delete", "g"}, `DELETE /api/v1/groups/g`},
		{[]string{"groups", "reset-offsets", "g", "--topic", "orders", "--to", "offset:7", "--partitions", "0,1", "--dry-run"},
			`POST /api/v1/groups/g/reset-offsets {"dry_run":true,"offset":7,"partitions":[0,1],"to":"offset","topic":"orders"}`},
		{[]string{"acls", "create", "--principal", "User:bob", "--operation", "READ", "--topic", "orders", "--prefixed"},
			`POST /api/v1/acls {"resource_type":"topic","resource_name":"orders","pattern":"prefixed","principal":"User:bob","host":"*","operation":"read","permission":"allow"}`},
		{[]string{"acls", "list", "--principal", "User:bob", "--deny"}, `GET /api/v1/acls?permission=deny&principal=User%3Abob`},
		{[]string{"acls", "delete", "--group", "g"}, `DELETE /api/v1/acls {"resource_type":"group","resource_name":"g"}`},
		{[]string{"acls", "delete", "--all"}, `DELETE /api/v1/acls {}`},
		{[]string{"users", "list"}, `GET /api/v1/users`},
		{[]string{"users", "set", "bob", "--mechanism", "SCRAM-SHA-512", "--iterations", "8192"},
			`PUT /api/v1/users/bob {"iterations":8192,"mechanism":"SCRAM-SHA-512","password":"n3w"}`},
		{[]string{"users", "delete", "bob", "--mechanism", "scram-sha-256"}, `DELETE /api/v1/users/bob?mechanism=SCRAM-SHA-256`},
		{[]string{"users", "delete", "bob"}, `DELETE /api/v1/users/bob`},
	} {
		f.mu.Lock()
		f.got, f.headers = nil, nil
		f.mu.Unlock()
		_, stderr, code := runCLI(env, append(tc.args, "--url", u, "--user", "admin")...)
		f.mu.Lock()
		got, hs := f.got, f.headers
		f.mu.Unlock()
		if code != 0 || len(got) != 1 || got[0] != tc.want {
			t.Errorf("korvet %s: exit %d (%s), sent %q\nwant %q", strings.Join(tc.args, " "), code, stderr, got, tc.want)
			continue
		}
		if user, pw, ok := (&http.Request{Header: hs[0]}).BasicAuth(); !ok || user != "admin" || pw != "s3cret" {
			t.Errorf("korvet %s: Authorization %q", strings.Join(tc.args, " "), hs[0].Get("Authorization"))
		}
	}
	// users set without a mechanism sets both; the token goes as Bearer.
	f.got, f.headers = nil, nil
	if _, stderr, code := runCLI(map[string]string{"KORVET_PASSWORD": "pw", "KORVET_ADMIN_TOKEN": "tok-0123456789abcdef"}, "users", "set", "carol", "--url", u); code != 0 {
		t.Fatalf("users set: exit %d: %s", code, stderr)
	}
	if len(f.got) != 2 || !strings.Contains(f.got[0], `"mechanism":"SCRAM-SHA-256","password":"pw"`) || !strings.Contains(f.got[1], "SCRAM-SHA-512") ||
		f.headers[0].Get("Authorization") != "Bearer tok-0123456789abcdef" {
		t.Errorf("users set carol sent %q with %q", f.got, f.headers[0].Get("Authorization"))
	}
}

func TestCLIServerErrors(t *testing.T) {
	f := &fakeAPI{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	for _, tc := range []struct {
		status int
		body   string
		code   int
		msg    string
	}{
		{404, `{"error":"unknown_topic_or_partition","message":"topic nope does not exist: korvet topics list shows the topics"}`, 3, "topic nope does not exist"},
		{403, `{"error":"topic_authorization_failed","message":"User:bob may not DELETE topic nope"}`, 4, "User:bob may not DELETE"},
		{401, `{"error":"wrong user name or password"}`, 4, "wrong user name or password"},
		{409, `{"error":"non_empty_group","message":"group g has 2 members: stop them first"}`, 1, "stop them first"},
		{400, `{"error":"invalid_config","message":"retention.ms: not a number"}`, 1, "retention.ms: not a number"},
		{503, `{"error":"coordinator_not_available","message":"try again"}`, 1, "try again"},
		{502, `<html>bad gateway</html>`, 1, "502 Bad Gateway: <html>bad gateway</html>"},
		{404, `404 page not found`, 1, "does not serve DELETE /api/v1/topics/nope"},
		{404, `{"error":"no_such_route","message":"no route"}`, 1, "does not serve DELETE /api/v1/topics/nope"},
		{405, `{"error":"method_not_allowed","message":"use GET"}`, 1, "is it older"},
	} {
		f.status, f.body = tc.status, tc.body
		stdout, stderr, code := runCLI(nil, "topics", "delete", "nope", "--url", srv.URL)
		if code != tc.code || !strings.Contains(stderr, tc.msg) || stdout != "" {
			t.Errorf("HTTP %d %s: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.status, tc.body, code, stdout, stderr, tc.code, tc.msg)
		}
	}
}

func TestCLIOutputs(t *testing.T) {
	f := &fakeAPI{status: 200, body: `[{"name":"b","records":5,"bytes":10,"partitions":[{"partition":0}]},{"name":"a","records":1,"bytes":2,"partitions":[{"partition":0},{"partition":1}]}]`}
	srv := httptest.NewServer(f)
	defer srv.Close()
	stdout, _, code := runCLI(nil, "topics", "list", "--url", srv.URL, "--output", "names")
	if code != 0 || stdout != "a\nb\n" {
		t.Errorf("--output names: %d %q", code, stdout)
	}
	stdout, _, _ = runCLI(nil, "topics", "list", "--url", srv.URL)
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "a ") {
		t.Errorf("table:\n%s", stdout)
	}
	stdout, _, _ = runCLI(nil, "topics", "list", "--url", srv.URL, "--output", "json")
	var back []map[string]any
	if err := json.Unmarshal([]byte(stdout), &back); err != nil || len(back) != 2 || back[0]["name"] != "b" {
		t.Errorf("--output json is not the API's document: %v %q", err, stdout)
	}
	f.body = `{"records":[{"partition":0,"offset":7,"timestamp":0,"key":{"text":"k"},"headers":[{"key":"h","value":{"base64":"AAE="}}],"value":{"json":{"a":1},"size":7,"truncated":false}},` +
		`{"partition":0,"offset":8,"timestamp":0,"key":null,"headers":[],"value":{"text":"long\n","size":9000,"truncated":true}}]}`
	stdout, _, _ = runCLI(nil, "topics", "tail", "t", "--url", srv.URL)
	for _, want := range []string{`k  `, `h=hex:0001`, `{"a":1}`, `long\n... (9000 bytes)`, `(null)`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("tail table lacks %q:\n%s", want, stdout)
		}
	}
}

// TestCompletionScripts: each script parses in its shell, and bash's
// registers the completion.
func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		script, stderr, code := runCLI(nil, "completion", sh)
		if code != 0 || script == "" {
			t.Fatalf("completion %s: exit %d: %s", sh, code, stderr)
		}
		for _, n := range cliNouns() {
			for _, v := range n.verbs {
				if !strings.Contains(script, v.name) {
					t.Errorf("%s completion lacks %s %s", sh, n.name, v.name)
				}
			}
		}
		flag := map[string]string{"bash": "--partitions", "zsh": "--partitions", "fish": "-l partitions"}[sh]
		if !strings.Contains(script, flag) || !strings.Contains(script, "list --output names") {
			t.Errorf("%s completion lacks flags or name completion", sh)
		}
		check := map[string][]string{"bash": {"bash", "-n"}, "zsh": {"zsh", "-n"}, "fish": {"fish", "--no-execute"}}[sh]
		if _, err := exec.LookPath(check[0]); err != nil {
			t.Logf("%s not installed: its script is not syntax-checked", sh)
			continue
		}
		cmd := exec.Command(check[0], check[1:]...)
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s rejects its completion script: %v\n%s", sh, err, out)
		}
	}
}

// TestCLIConfigTarget: without --url the CLI reaches [http] listen of the
// config (no admin socket in its data_dir) with the config's admin token;
// --user without a password and without a terminal is a usage error.
func TestCLIConfigTarget(t *testing.T) {
	f := &fakeAPI{status: 200, body: `[]`}
	srv := httptest.NewServer(f)
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "korvet.toml")
	text := fmt.Sprintf("data_dir = %q\nhttp.listen = %q\nhttp.admin_token = \"0123456789abcdef0123\"\n", dir, strings.TrimPrefix(srv.URL, "http://"))
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCLI(nil, "groups", "list", "--config", cfg); code != 0 {
		t.Fatalf("groups list --config: exit %d: %s", code, stderr)
	}
	if len(f.got) != 1 || f.got[0] != "GET /api/v1/groups" || f.headers[0].Get("Authorization") != "Bearer 0123456789abcdef0123" {
		t.Errorf("sent %q with Authorization %q", f.got, f.headers[0].Get("Authorization"))
	}
	if _, stderr, code := runCLI(nil, "groups", "list", "--config", cfg, "--user", "bob"); code != exitUsage || !strings.Contains(stderr, "KORVET_PASSWORD") {
		t.Errorf("--user without a password: exit %d, stderr %q", code, stderr)
	}
	if len(f.got) != 1 {
		t.Errorf("a request was sent without a password: %q", f.got)
	}
}
