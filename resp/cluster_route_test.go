package resp

import (
	"strings"
	"testing"
)

func TestRouteOf(t *testing.T) {
	for _, c := range []struct {
		args  []any
		kind  int
		key   string // "" for keyless
		split bool
	}{
		{[]any{"GET", "k"}, keysOne, "k", false},
		{[]any{"set", "k", "v"}, keysOne, "k", false},
		{[]any{"XADD", "s", "*", "f", "v"}, keysOne, "s", false},
		{[]any{"EVALSHA", "abc", "2", "k1", "k2", "arg"}, keysOne, "k1", false},
		{[]any{"eval", "return 1", "0", "arg"}, keysNone, "", false},
		{[]any{"FCALL", "f", "1", "fk"}, keysOne, "fk", false},
		{[]any{"XREAD", "COUNT", "10", "BLOCK", "0", "streams", "s1", "s2", "0", "0"}, keysOne, "s1", false},
		{[]any{"XREADGROUP", "GROUP", "g", "c", "STREAMS", "gs", ">"}, keysOne, "gs", false},
		{[]any{"XGROUP", "CREATE", "xs", "g", "$"}, keysOne, "xs", false},
		{[]any{"XINFO", "STREAM", "is"}, keysOne, "is", false},
		{[]any{"OBJECT", "ENCODING", "ok"}, keysOne, "ok", false},
		{[]any{"MEMORY", "USAGE", "mk"}, keysOne, "mk", false},
		{[]any{"MEMORY", "STATS"}, keysNone, "", false},
		{[]any{"WATCH", "{t}a", "{t}b"}, keysAll, "{t}a", false},
		{[]any{"DEL", "{t}a", "{t}b"}, keysSum, "{t}a", false},
		{[]any{"DEL", "a", "b"}, keysSum, "a", true},
		{[]any{"unlink", "only"}, keysSum, "only", false},
		{[]any{"EXISTS", "x", "y"}, keysSum, "x", true},
		{[]any{"MULTI"}, keysMulti, "", false},
		{[]any{"exec"}, keysClose, "", false},
		{[]any{"DISCARD"}, keysClose, "", false},
		{[]any{"WAIT", "1", "100"}, keysNone, "", false},
		{[]any{"PING"}, keysNone, "", false},
		{[]any{"INFO", "memory"}, keysNone, "", false},
		{[]any{"SCRIPT", "LOAD", "return 1"}, keysNone, "", false},
		{[]any{"CLIENT", "SETNAME", "x"}, keysNone, "", false},
		{[]any{"UNWATCH"}, keysNone, "", false},
	} {
		var p Pipeline
		p.Cmd(c.args...)
		cmd, argc, rest, err := nextCommand(p.buf)
		if err != nil || len(rest) != 0 || argc != len(c.args) {
			t.Fatalf("%v: nextCommand argc %d rest %q err %v", c.args, argc, rest, err)
		}
		r := routeOf(cmd, argc)
		if r.kind != c.kind || string(r.key) != c.key || r.split != c.split {
			t.Errorf("%v: kind %d key %q split %v, want %d %q %v", c.args, r.kind, r.key, r.split, c.kind, c.key, c.split)
		}
		if want := -1; c.key != "" {
			if want = Slot(c.key); r.slot != want {
				t.Errorf("%v: slot %d, want %d", c.args, r.slot, want)
			}
		} else if r.slot != -1 {
			t.Errorf("%v: keyless with slot %d", c.args, r.slot)
		}
	}
}

func TestNextCommandMalformed(t *testing.T) {
	for _, b := range []string{"", "PING\r\n", "*2\r\n$3\r\nGET\r\n", "*1\r\n$9\r\nGET\r\n", "*x\r\n"} {
		if _, _, _, err := nextCommand([]byte(b)); err == nil {
			t.Errorf("%q: no error", b)
		}
	}
}

// TestPlan checks the pipeline splitter: units, blocks, split DELs.
func TestPlan(t *testing.T) {
	var p Pipeline
	p.Cmd("PING")                       // 0: keyless first: own unit, any master
	p.Cmd("SET", "a", "1")              // 1
	p.Cmd("WAIT", "1", "0")             // 2: joins 1
	p.Cmd("WATCH", "{t}x")              // 3: with the block after it
	p.Cmd("MULTI")                      // 4
	p.Cmd("INCR", "{t}x")               // 5
	p.Cmd("EXEC")                       // 6
	p.Cmd("WAIT", "1", "0")             // 7: joins the block
	p.Cmd("DEL", "a", "b", "c", "{t}x") // 8: split per slot
	p.Cmd("PING")                       // 9: after a split: own unit
	p.Cmd("GET", "b")                   // 10
	units, err := plan(&p)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		first, n, cmds int
		slot           int
		block, part    bool
		raw            string
	}
	ws := []want{
		{0, 1, 1, -1, false, false, "PING"},
		{1, 2, 2, Slot("a"), false, false, "SET a 1|WAIT 1 0"},
		{3, 5, 5, Slot("{t}x"), true, false, "WATCH {t}x|MULTI|INCR {t}x|EXEC|WAIT 1 0"},
	}
	// DEL parts, one per slot, in the order of their first key.
	seen := map[int]bool{}
	for _, k := range []string{"a", "b", "c", "{t}x"} {
		if seen[Slot(k)] {
			continue
		}
		seen[Slot(k)] = true
		ws = append(ws, want{8, 1, 1, Slot(k), false, true, "DEL " + k})
	}
	ws = append(ws, want{9, 1, 1, Slot("{t}x"), false, false, "PING"}, want{10, 1, 1, Slot("b"), false, false, "GET b"})
	if len(units) != len(ws) {
		t.Fatalf("%d units, want %d", len(units), len(ws))
	}
	for i, u := range units {
		w := ws[i]
		if u.first != w.first || u.n != w.n || u.cmds != w.cmds || u.slot != w.slot || u.block != w.block || u.part != w.part {
			t.Errorf("unit %d: %+v, want %+v", i, u, w)
		}
		if got := decode(t, u.raw); got != w.raw {
			t.Errorf("unit %d sends %q, want %q", i, got, w.raw)
		}
	}
}

func TestPlanCrossSlot(t *testing.T) {
	var p Pipeline
	p.Cmd("MULTI")
	p.Cmd("SET", "a", "1")
	p.Cmd("SET", "b", "1")
	p.Cmd("EXEC")
	_, err := plan(&p)
	if err == nil || !strings.Contains(err.Error(), `"a" is in slot`) || !strings.Contains(err.Error(), `"b" in slot`) {
		t.Fatalf("plan: %v", err)
	}
	p.Reset()
	p.Cmd("WATCH", "a", "b")
	if _, err := plan(&p); err == nil {
		t.Fatal("WATCH across slots planned")
	}
}

// decode renders a unit's commands as "CMD arg|CMD arg".
func decode(t *testing.T, raw []byte) string {
	t.Helper()
	var out []string
	for len(raw) > 0 {
		cmd, _, rest, err := nextCommand(raw)
		if err != nil {
			t.Fatal(err)
		}
		a := newArgs(cmd)
		var words []string
		for {
			v, ok := a.next()
			if !ok {
				break
			}
			words = append(words, string(v))
		}
		out = append(out, strings.Join(words, " "))
		raw = rest
	}
	return strings.Join(out, "|")
}

func TestRedirectOf(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want redirect
		ok   bool
	}{
		{"-MOVED 3999 127.0.0.1:6381\r\n", redirect{"MOVED", 3999, "127.0.0.1:6381"}, true},
		{"-ASK 12 10.0.0.2:7000\r\n", redirect{"ASK", 12, "10.0.0.2:7000"}, true},
		{"-TRYAGAIN Multiple keys request during rehashing of slot\r\n", redirect{kind: "TRYAGAIN"}, true},
		{"-CLUSTERDOWN The cluster is down\r\n", redirect{kind: "CLUSTERDOWN"}, true},
		{"-MOVED 99999 h:1\r\n", redirect{}, false},
		{"-ERR MOVED\r\n", redirect{}, false},
		{"+MOVED 1 h:1\r\n", redirect{}, false},
	} {
		var rs Replies
		if _, err := readReplies(strings.NewReader(c.raw), &rs, 1, 1<<20, nil, false); err != nil {
			t.Fatal(err)
		}
		got, ok := redirectOf(rs.At(0))
		if ok != c.ok || got != c.want {
			t.Errorf("%q: %+v %v", c.raw, got, ok)
		}
	}
}
