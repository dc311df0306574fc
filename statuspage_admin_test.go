package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/korvet/korvet/internal/testbed"
)

// TestStatusPageAdmin drives the status page's admin views in headless
// Chromium against a real korvet with SASL, ACLs and HTTP Basic on: log
// in with the page's form, create a topic, produce a test record and see
// it in the topic view, reset a franz-go group's offsets to earliest
// (dry run, then apply), delete the topic. Each step is checked through
// kadm too. Screenshots (desktop and a 390 px phone) go to
// $KORVET_ARTIFACTS, or a temp dir.
func TestStatusPageAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and a browser")
	}
	chromium := findChromium(t)
	pwFile := filepath.Join(t.TempDir(), "admin.password")
	if err := os.WriteFile(pwFile, []byte("root-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startKorvetWith(t, testbed.StartRedis(t), func(kafkaAddr, httpAddr string) string {
		return fmt.Sprintf(`admin_user = "root"
admin_password_file = %q
[kafka]
listen = %q
auth = "sasl"
acls = true
[http]
listen = %q
auth = "basic"
`, pwFile, kafkaAddr, httpAddr)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rootSASL := kgo.SASL(scram.Auth{User: "root", Pass: "root-secret-1"}.AsSha256Mechanism())
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.kafkaAddr), rootSASL)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	b := newBrowser(t, ctx, chromium)
	art := artifactDir(t)

	// Log in with the page's form: the page loads without a login and
	// asks for one when the API answers 401.
	b.do("open the page", chromedp.Navigate(p.httpBase+"/"))
	b.waitJS("the log-in form", `!document.getElementById("login").hidden && document.body.dataset.state === "login"`)
	b.shot(art, "admin-login-phone.png", 390, 844, "")
	b.do("back to the desktop", chromedp.EmulateViewport(1280, 900))
	b.do("log in",
		chromedp.SendKeys(chromedp.ID("login-user"), "root"),
		chromedp.SendKeys(chromedp.ID("login-password"), "root-secret-1"),
		chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`)))
	b.waitJS("the page, logged in", `document.body.dataset.state === "ready" && document.getElementById("login").hidden &&
		document.getElementById("viewer").textContent === "root" && !document.getElementById("logout").hidden`)

	// Create a topic; the page opens its view.
	const topic = "web-orders"
	b.do("create the topic",
		chromedp.Click(chromedp.CSS("#topic-create summary")),
		chromedp.SendKeys(chromedp.ID("create-name"), topic),
		chromedp.SetValue(chromedp.ID("create-partitions"), "2"),
		chromedp.SendKeys(chromedp.ID("create-configs"), "retention.ms=86400000"),
		chromedp.Click(chromedp.CSS(`#topic-create-form button[type="submit"]`)))
	b.waitJS("the topic view with 2 partitions and its retention", `document.getElementById("topic-view").dataset.viewTopic === "web-orders" &&
		document.querySelectorAll("#tv-partitions tr").length === 2 &&
		document.querySelector('#tv-configs tr[data-config="retention.ms"] input')?.value === "86400000"`)
	details, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describe configs: %v", err)
	}
	if rc, err := details.On(topic, nil); err != nil || !slices.ContainsFunc(rc.Configs, func(c kadm.Config) bool { return c.Key == "retention.ms" && c.MaybeValue() == "86400000" }) {
		t.Errorf("over Kafka, %s lacks retention.ms=86400000: %v %+v", topic, err, rc)
	}
	if td, err := adm.ListTopics(ctx, topic); err != nil || len(td[topic].Partitions) != 2 {
		t.Errorf("over Kafka, %s: %v %+v; want 2 partitions", topic, err, td[topic])
	}

	// The same name again: the API's message is shown, the page stays.
	b.do("create it again",
		chromedp.SendKeys(chromedp.ID("create-name"), topic),
		chromedp.Click(chromedp.CSS(`#topic-create-form button[type="submit"]`)))
	b.waitJS("the refusal shown", `(() => { const n = document.getElementById("notice");
		return !n.hidden && n.dataset.kind === "error" && n.textContent.length > 10 })()`)

	// Produce a test record to partition 0: JSON with markup in it, which
	// must land in the DOM as text.
	value := `{"hello":"web","html":"<i id=pwn>x</i>"}`
	b.do("produce a test record",
		chromedp.SetValue(chromedp.ID("tv-p-partition"), "0"),
		chromedp.SendKeys(chromedp.ID("tv-p-key"), "k-1"),
		chromedp.SendKeys(chromedp.ID("tv-p-value"), value),
		chromedp.SendKeys(chromedp.ID("tv-p-headers"), "source=browser"),
		chromedp.Click(chromedp.CSS(`#tv-produce button[type="submit"]`)))
	b.waitJS("the record in the topic view", `(() => { const row = document.querySelector('#tv-records tr[data-offset="0"][data-record-partition="0"]');
		return row && row.querySelector("td.value").textContent.includes('{"hello":"web","html":"<i id=pwn>x</i>"}') &&
			row.querySelector("td.key").textContent === "k-1" && row.textContent.includes("source") })()`)
	if injected := b.evalBool(`document.getElementById("pwn") !== null`); injected {
		t.Error("a record's value was parsed as HTML")
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(topic, 0); o.Offset != 1 {
		t.Errorf("over Kafka, %s/0 ends at %d; want 1", topic, o.Offset)
	}
	b.do("show JSON", chromedp.Click(chromedp.CSS(`input[name="tv-fmt"][value="json"]`)))
	b.waitJS("the value as pretty JSON", `document.querySelector("#tv-records td.value pre.json")?.textContent.includes('"hello": "web"')`)
	b.do("show hex", chromedp.Click(chromedp.CSS(`input[name="tv-fmt"][value="hex"]`)))
	b.waitJS("the value as hex", `document.querySelector("#tv-records td.value code.hex")?.textContent.startsWith("7b 22 68 65 6c 6c 6f 22")`)
	b.shot(art, "admin-topic.png", 1280, 900, "")
	b.shot(art, "admin-topic-phone.png", 390, 844, "topic-view")
	b.do("back to the desktop", chromedp.EmulateViewport(1280, 900))

	// A group that consumed the record, committed and left.
	const group = "web-group"
	consumeAndLeave(t, ctx, p.kafkaAddr, rootSASL, group, topic)
	committed := func() int64 {
		t.Helper()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("fetch offsets: %v", err)
		}
		o, ok := offs.Lookup(topic, 0)
		if !ok {
			return -1
		}
		return o.At
	}
	if at := committed(); at != 1 {
		t.Fatalf("%s committed %d on %s/0; want 1", group, at, topic)
	}
	testbed.WaitFor(t, 30*time.Second, group+" empty", func() bool {
		described, err := adm.DescribeGroups(ctx, group)
		return err == nil && described[group].State == "Empty"
	})

	// Reset it to earliest on the page: a dry run first, then apply.
	b.waitJS("the group in the groups table", `document.querySelector('#groups-body tr[data-group="web-group"] a') !== null`)
	// The table is redrawn every 2 s: find and click its link in one go.
	b.do("open the group", chromedp.Evaluate[chromedp.Void](`document.querySelector('#groups-body tr[data-group="web-group"] a').click()`))
	b.waitJS("the group view with its offset", `document.getElementById("group-view").dataset.viewGroup === "web-group" &&
		document.querySelector('#gv-offsets tr[data-offset-topic="web-orders"][data-offset-partition="0"] [data-field="committed"]')?.textContent === "1"`)
	// lag_history is sampled every 30 s, longer than this test: the drawing
	// itself is checked on known samples, in the page's own code.
	spark, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(() => {
		const el = korvet.sparkline([{time: "2026-01-01T00:00:00Z", lag: 0}, {time: "2026-01-01T00:00:30Z", lag: 10}, {time: "2026-01-01T00:01:00Z", lag: 5}]);
		return el.querySelector("svg polyline").getAttribute("points") + " | " + el.textContent })()`))
	if want := "3.0,57.0 150.0,3.0 297.0,30.0 | max 10 · last 1 min"; err != nil || spark != want {
		t.Errorf("sparkline: %q %v; want %q", spark, err, want)
	}
	b.do("preview the reset",
		chromedp.SetValue(chromedp.ID("gv-r-topic"), topic),
		chromedp.SetValue(chromedp.ID("gv-r-to"), "earliest"),
		chromedp.Click(chromedp.ID("gv-r-preview")))
	b.waitJS("the dry run's plan", `!document.getElementById("gv-r-plan").hidden &&
		document.querySelector('#gv-r-plan-body tr[data-plan-partition="0"]')?.lastChild.textContent === "0"`)
	if at := committed(); at != 1 {
		t.Errorf("the dry run moved the offset to %d", at)
	}
	b.shot(art, "admin-group.png", 1280, 900, "")
	b.do("apply the reset", chromedp.Click(chromedp.ID("gv-r-apply")))
	b.waitJS("the reset done", `document.getElementById("gv-r-plan").hidden && document.getElementById("notice").textContent.startsWith("Reset ")`)
	if at := committed(); at != 0 {
		t.Errorf("over Kafka, %s committed %d on %s/0 after the reset; want 0", group, at, topic)
	}
	b.waitJS("the group view showing it", `document.querySelector('#gv-offsets tr[data-offset-topic="web-orders"][data-offset-partition="0"] [data-field="committed"]')?.textContent === "0"`)
	b.shot(art, "admin-group-phone.png", 390, 844, "group-view")

	// On the phone now: edit a config in place, and delete the record
	// before offset 1 of partition 0 (after a confirmation).
	b.do("open the topic again", chromedp.Evaluate[chromedp.Void](`location.hash = "#topic=web-orders"`))
	b.waitJS("the topic view", `!document.getElementById("topic-view").hidden && document.querySelectorAll("#tv-partitions tr").length === 2`)
	b.do("edit retention.ms",
		chromedp.SetValue(chromedp.CSS(`#tv-configs tr[data-config="retention.ms"] input`), "172800000"),
		chromedp.Click(chromedp.CSS(`#tv-configs tr[data-config="retention.ms"] button:not(.link)`)))
	b.waitJS("the new value saved", `document.getElementById("notice").textContent === "Set retention.ms = 172800000." &&
		document.querySelector('#tv-configs tr[data-config="retention.ms"] input').value === "172800000"`)
	testbed.Eventually(t, 10*time.Second, "retention.ms over Kafka", func() (bool, string) {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		rc, err := rcs.On(topic, nil)
		got := ""
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				got = c.MaybeValue()
			}
		}
		return err == nil && got == "172800000", fmt.Sprintf("%q %v", got, err)
	})
	b.do("ask to delete records",
		chromedp.SetValue(chromedp.ID("tv-dr-partition"), "0"),
		chromedp.SetValue(chromedp.ID("tv-dr-before"), "1"),
		chromedp.Click(chromedp.CSS(`#tv-delete-records button[type="submit"]`)))
	b.waitJS("the confirmation", `document.querySelector("#tv-delete-records .question")?.textContent === "Delete the records of partition 0 before offset 1?"`)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if o, _ := starts.Lookup(topic, 0); err != nil || o.Offset != 0 {
		t.Errorf("records deleted before the confirmation: start %d %v", o.Offset, err)
	}
	b.do("confirm", chromedp.Click(chromedp.CSS(`#tv-delete-records [data-action="confirm"]`)))
	b.waitJS("the records deleted", `document.getElementById("notice").textContent === "Deleted; partition 0 now starts at 1." &&
		document.querySelector('#tv-partitions tr[data-partition="0"]')?.children[2].textContent === "1"`)
	starts, err = adm.ListStartOffsets(ctx, topic)
	if o, _ := starts.Lookup(topic, 0); err != nil || o.Offset != 1 {
		t.Errorf("over Kafka, %s/0 starts at %d after deleting records (%v); want 1", topic, o.Offset, err)
	}

	// Delete the topic: the button waits for its name typed out.
	b.do("type most of the name",
		chromedp.Click(chromedp.CSS("#topic-view details.danger-zone summary")),
		chromedp.SendKeys(chromedp.ID("tv-delete-confirm"), "web-order"))
	if b.evalBool(`!document.getElementById("tv-delete-button").disabled`) {
		t.Error("delete enabled before the topic's name was typed")
	}
	b.do("finish the name and delete",
		chromedp.SendKeys(chromedp.ID("tv-delete-confirm"), "s"),
		chromedp.WaitEnabled(chromedp.ID("tv-delete-button")),
		chromedp.Click(chromedp.ID("tv-delete-button")))
	b.waitJS("the topic gone from the page", `document.getElementById("topic-view").hidden &&
		document.getElementById("notice").textContent.startsWith("Deleted topic web-orders") &&
		document.querySelector('#topics-body tr[data-topic="web-orders"]') === null`)
	testbed.Eventually(t, 30*time.Second, topic+" deleted over Kafka", func() (bool, string) {
		td, err := adm.ListTopics(ctx)
		return err == nil && !td.Has(topic), fmt.Sprintf("%v %v", err, td.Names())
	})

	// Users and ACLs: root (a super user) has both panels. A new user
	// from the form, and an ACL for it, added and then deleted.
	b.waitJS("the Users and ACLs panels", `!document.getElementById("users").hidden && !document.getElementById("acls").hidden &&
		document.querySelector('#users-body tr[data-user="root"]') !== null`)
	b.do("add a user",
		chromedp.Click(chromedp.CSS("#users details summary")),
		chromedp.SendKeys(chromedp.ID("user-name"), "carol"),
		chromedp.SendKeys(chromedp.ID("user-password"), "carol-pw-789"),
		chromedp.Click(chromedp.CSS(`#user-form button[type="submit"]`)))
	b.waitJS("carol listed", `document.querySelector('#users-body tr[data-user="carol"]')?.textContent.includes("SCRAM-SHA-256 (8192 iterations)") &&
		document.getElementById("user-password").value === ""`)
	scrams, err := adm.DescribeUserSCRAMs(ctx, "carol")
	if err != nil || scrams["carol"].Err != nil || len(scrams["carol"].CredInfos) != 1 || scrams["carol"].CredInfos[0].Iterations != 8192 {
		t.Errorf("over Kafka, carol's SCRAM credentials: %v %+v", err, scrams["carol"])
	}
	b.do("add an ACL",
		chromedp.Click(chromedp.CSS("#acls details summary")),
		chromedp.SendKeys(chromedp.ID("acl-principal"), "User:carol"),
		chromedp.SetValue(chromedp.CSS(`#acl-form [name="operation"]`), "read"),
		chromedp.SetValue(chromedp.CSS(`#acl-form [name="resource_type"]`), "topic"),
		chromedp.SendKeys(chromedp.CSS(`#acl-form [name="resource_name"]`), "audit-"),
		chromedp.SetValue(chromedp.CSS(`#acl-form [name="pattern"]`), "prefixed"),
		chromedp.Click(chromedp.CSS(`#acl-form button[type="submit"]`)))
	b.waitJS("the ACL listed", `document.querySelector('#acls-body tr[data-acl-principal="User:carol"]')?.textContent.includes("audit- (prefixed)")`)
	carolACLs := func() int {
		t.Helper()
		res, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("audit-").Allow("User:carol").Operations(kadm.OpRead).
			ResourcePatternType(kadm.ACLPatternPrefixed).AllowHosts())
		if err != nil || len(res) != 1 || res[0].Err != nil {
			t.Fatalf("describe ACLs: %v %+v", err, res)
		}
		return len(res[0].Described)
	}
	if n := carolACLs(); n != 1 {
		t.Errorf("over Kafka, carol has %d ACLs; want 1", n)
	}
	b.do("delete the ACL",
		chromedp.Click(chromedp.CSS(`#acls-body tr[data-acl-principal="User:carol"] button`)),
		chromedp.Click(chromedp.CSS(`#acls-body tr[data-acl-principal="User:carol"] [data-action="confirm"]`)))
	b.waitJS("the ACL gone", `document.querySelector('#acls-body tr[data-acl-principal="User:carol"]') === null`)
	if n := carolACLs(); n != 0 {
		t.Errorf("over Kafka, carol has %d ACLs after the delete; want 0", n)
	}
	b.shot(art, "admin-access.png", 1280, 900, "users")

	// Logging out drops the login: the form again, and no data.
	b.do("log out", chromedp.Click(chromedp.ID("logout")))
	b.waitJS("the log-in form after logging out", `document.body.dataset.state === "login" && !document.getElementById("login").hidden`)
	b.checkConsole()
}

// consumeAndLeave consumes topic from the start in group until it has
// committed past the record at offset 0 of partition 0, and leaves the
// group. A commit refused by a
// rebalance (the first join may still settle) is retried after the next
// poll.
func consumeAndLeave(t *testing.T, ctx context.Context, addr string, sasl kgo.Opt, group, topic string) {
	t.Helper()
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), sasl, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close() // leaves the group
	pollCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for got := 0; ; {
		fs := cons.PollFetches(pollCtx)
		if err := pollCtx.Err(); err != nil {
			t.Fatalf("consume %s: nothing consumed and committed within 30s (%d records seen)", topic, got)
		}
		fs.EachError(func(tp string, part int32, err error) { t.Logf("fetch %s/%d: %v", tp, part, err) })
		if got += fs.NumRecords(); got == 0 {
			continue
		}
		if err := cons.CommitUncommittedOffsets(pollCtx); err != nil {
			t.Logf("commit (retried): %v", err)
			continue
		}
		if cons.CommittedOffsets()[topic][0].Offset >= 1 {
			return
		}
	}
}

// browser is one headless Chromium tab for a test, started with the flags
// a CI box needs, in a fresh profile; the test's end stops it.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu         sync.Mutex
	exceptions []string // uncaught exceptions of the page
}

func newBrowser(t *testing.T, parent context.Context, bin string) *browser {
	t.Helper()
	home := t.TempDir()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(parent,
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(filepath.Join(home, "profile")),
		chromedp.Env("HOME="+home),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // starts the browser and opens the tab
		t.Fatalf("start chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() {
				b.mu.Lock()
				b.exceptions = append(b.exceptions, fmt.Sprintf("%s:%d %s", m.URL, m.Line+1, m.Text))
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// do runs actions in the tab; what names the step in a failure.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

// waitJS waits until expr is true in the page.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		b.fail("wait for "+what, err)
	}
}

func (b *browser) evalBool(expr string) bool {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		b.fail("evaluate "+expr, err)
	}
	return v
}

// fail ends the test with the page's state: its notice and its body.
func (b *browser) fail(what string, err error) {
	b.t.Helper()
	state, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.dataset.state + " | notice: " + document.getElementById("notice").textContent +
		" | " + document.querySelector("main").innerText.slice(0, 3000)`))
	b.checkConsole()
	b.t.Fatalf("%s: %v\npage: %s", what, err, state)
}

// shot keeps a screenshot at a viewport size: with view "" the whole page
// from its top, else the viewport with the element of that id at its top
// (as a phone user scrolled to it sees it).
func (b *browser) shot(dir, name string, width, height int64, view string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		b.fail("viewport", err)
	}
	var png []byte
	var err error
	if view == "" {
		err = chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
		if err == nil {
			png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		}
	} else {
		err = chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById(`+strconv.Quote(view)+`).scrollIntoView({block: "start"})`))
		if err == nil {
			png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
		}
	}
	if err != nil {
		b.fail("screenshot "+name, err)
	}
	out := filepath.Join(dir, name)
	if err := os.WriteFile(out, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	if len(png) < 10000 {
		b.t.Errorf("screenshot %s: only %d bytes", out, len(png))
	}
	b.t.Logf("screenshot: %s", out)
}

// checkConsole fails the test for uncaught exceptions in the page.
func (b *browser) checkConsole() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.exceptions {
		b.t.Errorf("page exception: %s", e)
	}
	b.exceptions = nil
}
