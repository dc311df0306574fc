package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/korvet/korvet/internal/testbed"
)

// cliKorvet is a real korvet (real redis-server) with ACLs on, HTTP Basic
// logins, root as its super user, and the built korvet binary to run the
// admin commands with.
type cliKorvet struct {
	*testbed.Korvet
	bin string
}

const cliRootPassword = "root-password-1"

func startCLIKorvet(t *testing.T) *cliKorvet {
	t.Helper()
	if testing.Short() {
		t.Skip("starts redis-server and korvet")
	}
	r := testbed.StartRedis(t)
	pwFile := filepath.Join(t.TempDir(), "root.pw")
	if err := os.WriteFile(pwFile, []byte(cliRootPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Kafka clients of the test connect without SASL: User:ANONYMOUS is
	// super on the Kafka side. HTTP takes logins only, so anonymous HTTP
	// requests never reach the admin API.
	k := testbed.StartKorvet(t, testbed.KorvetOptions{RedisURL: r.URL, Extra: strings.Join([]string{
		`admin_user = "root"`,
		`admin_password_file = "` + pwFile + `"`,
		`kafka.acls = true`,
		`kafka.super_users = ["User:ANONYMOUS"]`,
		`http.auth = "basic"`,
		`redis.memory_sample_interval = "1s"`,
		`cold.archive_interval = "1s"`,
	}, "\n")})
	return &cliKorvet{Korvet: k, bin: testbed.BuildKorvet(t)}
}

// run runs the korvet binary with args (and env added), returning its
// stdout, stderr and exit code.
func (k *cliKorvet) run(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader("")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee) && ctx.Err() == nil:
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("korvet %s: %v (stderr %s)", strings.Join(args, " "), err, errb.String())
	return "", "", -1
}

// ok runs a command over the admin socket (--config) that must succeed.
func (k *cliKorvet) ok(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, code := k.run(t, []string{"KORVET_NEW_PASSWORD=alice-password-1"}, append(args, "--config", k.Config)...)
	if code != 0 {
		t.Fatalf("korvet %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout
}

// code runs a command over the admin socket and returns its exit code.
func (k *cliKorvet) code(t *testing.T, args ...string) int {
	t.Helper()
	_, _, code := k.run(t, nil, append(args, "--config", k.Config)...)
	return code
}

func (k *cliKorvet) jsonOut(t *testing.T, v any, args ...string) {
	t.Helper()
	out := k.ok(t, append(args, "--output", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("korvet %s --output json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestCLIEndToEnd(t *testing.T) {
	k := startCLIKorvet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.KafkaAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	// Topics: create, then the same state through kadm and --output json.
	k.ok(t, "topics", "create", "orders", "--partitions", "3", "--topic-config", "retention.ms=86400000")
	tds, err := adm.ListTopics(ctx, "orders")
	if err != nil || tds["orders"].Err != nil || len(tds["orders"].Partitions) != 3 {
		t.Fatalf("kadm sees orders as %+v (%v)", tds["orders"], err)
	}
	var list []struct {
		Name       string            `json:"name"`
		Partitions []json.RawMessage `json:"partitions"`
	}
	k.jsonOut(t, &list, "topics", "list")
	if len(list) != 1 || list[0].Name != "orders" || len(list[0].Partitions) != 3 {
		t.Fatalf("topics list --output json: %+v", list)
	}
	if out := k.ok(t, "topics", "list", "--output", "names"); out != "orders\n" {
		t.Errorf("topics list --output names: %q", out)
	}
	if code := k.code(t, "topics", "create", "orders"); code != exitFailed {
		t.Errorf("creating orders again: exit %d, want 1", code)
	}

	k.ok(t, "topics", "alter", "orders", "--set", "retention.ms=3600000")
	rcs, err := adm.DescribeTopicConfigs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rcs.On("orders", nil); err != nil || !hasConfig(c.Configs, "retention.ms", "3600000") {
		t.Errorf("kadm: retention.ms of orders after alter: %+v %v", c, err)
	}
	k.ok(t, "topics", "add-partitions", "orders", "--count", "4")
	var desc struct {
		Name       string `json:"name"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Start     int64 `json:"start_offset"`
			End       int64 `json:"end_offset"`
		} `json:"partitions"`
		Configs []struct {
			Name, Value string
		} `json:"configs"`
	}
	k.jsonOut(t, &desc, "topics", "describe", "orders")
	if desc.Name != "orders" || len(desc.Partitions) != 4 {
		t.Errorf("describe after add-partitions: %+v", desc)
	}
	found := false
	for _, c := range desc.Configs {
		found = found || c.Name == "retention.ms" && c.Value == "3600000"
	}
	if !found {
		t.Errorf("describe: no retention.ms=3600000 in %+v", desc.Configs)
	}

	// Records: produce through the CLI, read through kgo and tail.
	k.ok(t, "topics", "produce", "orders", "--partition", "0", "--key", "k0", "--value", `{"n":0}`)
	for i := 1; i < 5; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var tail struct {
		Records []struct {
			Offset int64 `json:"offset"`
			Key    struct {
				Text string `json:"text"`
			} `json:"key"`
		} `json:"records"`
	}
	k.jsonOut(t, &tail, "topics", "tail", "orders", "--partition", "0", "--limit", "5")
	if len(tail.Records) != 5 {
		t.Fatalf("tail: %+v", tail)
	}
	sort.Slice(tail.Records, func(i, j int) bool { return tail.Records[i].Offset < tail.Records[j].Offset })
	if tail.Records[0].Offset != 0 || tail.Records[0].Key.Text != "k0" {
		t.Errorf("tail: first record %+v, want offset 0 key k0", tail.Records[0])
	}
	k.ok(t, "topics", "delete-records", "orders", "--partition", "0", "--before", "1")
	starts, err := adm.ListStartOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("orders", 0); o.Offset != 1 {
		t.Errorf("kadm: log start of orders/0 after delete-records = %d, want 1", o.Offset)
	}

	// Groups: a group that committed its offsets and left.
	gcl, err := kgo.NewClient(kgo.SeedBrokers(k.KafkaAddr), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 4 && ctx.Err() == nil {
		got += len(gcl.PollFetches(ctx).Records())
	}
	if err := gcl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	gcl.Close()
	testbed.Eventually(t, 30*time.Second, "billing without members", func() (bool, string) {
		var g struct {
			State   string            `json:"state"`
			Members []json.RawMessage `json:"members"`
			Offsets []struct {
				Partition int32 `json:"partition"`
				Committed int64 `json:"committed"`
			} `json:"offsets"`
		}
		k.jsonOut(t, &g, "groups", "describe", "billing")
		return len(g.Members) == 0 && len(g.Offsets) > 0, g.State
	})
	if out := k.ok(t, "groups", "list"); !strings.Contains(out, "billing") {
		t.Errorf("groups list: %s", out)
	}

	var reset struct {
		Offsets []struct {
			Partition int32 `json:"partition"`
			Offset    int64 `json:"offset"`
		} `json:"offsets"`
		DryRun bool `json:"dry_run"`
	}
	k.jsonOut(t, &reset, "groups", "reset-offsets", "billing", "--topic", "orders", "--to", "earliest", "--partitions", "0", "--dry-run")
	if !reset.DryRun || len(reset.Offsets) != 1 || reset.Offsets[0].Offset != 1 {
		t.Errorf("reset dry run: %+v", reset)
	}
	committed := func() int64 {
		fo, err := adm.FetchOffsets(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := fo.Lookup("orders", 0)
		return o.At
	}
	if c := committed(); c != 5 {
		t.Errorf("committed offset after dry run = %d, want 5 (unchanged)", c)
	}
	k.ok(t, "groups", "reset-offsets", "billing", "--topic", "orders", "--to", "offset:3", "--partitions", "0")
	if c := committed(); c != 3 {
		t.Errorf("kadm: committed offset after reset to 3 = %d", c)
	}
	k.ok(t, "groups", "delete", "billing")
	if code := k.code(t, "groups", "describe", "billing"); code != exitNotFound {
		t.Errorf("describe of a deleted group: exit %d, want 3", code)
	}

	// Users and ACLs; alice may do only what her ACL allows.
	k.ok(t, "users", "set", "alice")
	var users struct {
		Users []struct {
			Name string `json:"name"`
		} `json:"users"`
	}
	k.jsonOut(t, &users, "users", "list")
	names := []string{}
	for _, u := range users.Users {
		names = append(names, u.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "alice") {
		t.Errorf("users list: %v", names)
	}
	url := "http://" + k.HTTPAddr
	asAlice := func(args ...string) (string, string, int) {
		return k.run(t, []string{"KORVET_PASSWORD=alice-password-1"}, append(args, "--url", url, "--user", "alice")...)
	}
	if out, _, code := asAlice("topics", "list", "--output", "names"); code != 0 || out != "" {
		t.Errorf("alice without ACLs lists %q (exit %d)", out, code)
	}
	if _, stderr, code := asAlice("topics", "create", "alices"); code != exitNotAllowed {
		t.Errorf("alice creating a topic: exit %d, want 4 (stderr %s)", code, stderr)
	}
	if _, _, code := asAlice("topics", "delete", "orders"); code != exitNotAllowed {
		t.Errorf("alice deleting orders: exit %d, want 4", code)
	}
	if _, _, code := k.run(t, []string{"KORVET_PASSWORD=wrong"}, "topics", "list", "--url", url, "--user", "alice"); code != exitNotAllowed {
		t.Errorf("a wrong password: exit %d, want 4", code)
	}
	if _, _, code := k.run(t, nil, "topics", "list", "--url", url); code != exitNotAllowed {
		t.Errorf("no login over HTTP: exit %d, want 4", code)
	}
	k.ok(t, "acls", "create", "--principal", "User:alice", "--operation", "describe", "--topic", "orders")
	var acls struct {
		ACLs []struct {
			Principal    string `json:"principal"`
			Operation    string `json:"operation"`
			ResourceName string `json:"resource_name"`
		} `json:"acls"`
	}
	k.jsonOut(t, &acls, "acls", "list", "--principal", "User:alice")
	if len(acls.ACLs) != 1 || acls.ACLs[0].ResourceName != "orders" || !strings.EqualFold(acls.ACLs[0].Operation, "describe") {
		t.Errorf("acls list: %+v", acls)
	}
	if out, _, code := asAlice("topics", "list", "--output", "names"); code != 0 || out != "orders\n" {
		t.Errorf("alice with DESCRIBE on orders lists %q (exit %d)", out, code)
	}
	// root logs in over HTTP too.
	if _, stderr, code := k.run(t, []string{"KORVET_PASSWORD=" + cliRootPassword}, "topics", "describe", "orders", "--url", url, "--user", "root"); code != 0 {
		t.Errorf("root over --url: exit %d: %s", code, stderr)
	}
	var deleted struct {
		Deleted []json.RawMessage `json:"deleted"`
	}
	k.jsonOut(t, &deleted, "acls", "delete", "--principal", "User:alice")
	if len(deleted.Deleted) != 1 {
		t.Errorf("acls delete: %+v", deleted)
	}
	k.ok(t, "users", "delete", "alice")
	// korvet remembers a verified HTTP login for up to 30 s (web/auth.go,
	// loginCache): a deleted user's login fails once that has passed.
	testbed.Eventually(t, 45*time.Second, "deleted alice refused", func() (bool, string) {
		_, stderr, code := asAlice("topics", "list")
		return code == exitNotAllowed, stderr
	})

	// The smoke script, then deletes and the exit codes of missing things.
	runCLISmoke(t, k, "--config", k.Config)
	k.ok(t, "topics", "delete", "orders")
	if code := k.code(t, "topics", "describe", "orders"); code != exitNotFound {
		t.Errorf("describe of a deleted topic: exit %d, want 3", code)
	}
	if code := k.code(t, "topics", "delete", "orders"); code != exitNotFound {
		t.Errorf("delete of a missing topic: exit %d, want 3", code)
	}

	// Completion: bash loads the script and registers it.
	out, err := exec.Command("bash", "-c", `source <("$0" completion bash) && complete -p korvet`, k.bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-F _korvet korvet") {
		t.Errorf("bash: source <(korvet completion bash); complete -p korvet: %v\n%s", err, out)
	}

	// No korvet: exit 5.
	k.Stop()
	if _, stderr, code := k.run(t, nil, "topics", "list", "--config", k.Config); code != exitUnreachable {
		t.Errorf("korvet stopped: exit %d, want 5 (stderr %s)", code, stderr)
	}
}

func hasConfig(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// runCLISmoke runs scripts/cli-smoke.sh with the test's binary.
func runCLISmoke(t *testing.T, k *cliKorvet, conn ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{"scripts/cli-smoke.sh"}, conn...)...)
	cmd.Env = append(os.Environ(), "KORVET_BIN="+k.bin)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("scripts/cli-smoke.sh: %v\n%s", err, out)
	}
}
