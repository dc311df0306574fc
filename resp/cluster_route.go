package resp

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/tidwall/redcon"
)

// How a command names its keys, for routing in a Redis Cluster.
const (
	keysNone  = iota // keyless: goes with the command before it
	keysOne          // one routing key
	keysSum          // DEL, UNLINK, EXISTS, TOUCH: every argument a key, integer replies add up
	keysAll          // WATCH: every argument a key, all in one slot
	keysMulti        // MULTI: opens a block
	keysClose        // EXEC, DISCARD: close a block
)

// route is where one command goes.
type route struct {
	kind  int
	slot  int    // slot of key; -1 when keyless
	key   []byte // the routing key (the first one)
	split bool   // keysSum with keys in several slots
	// other is a key in another slot than key (split, or a cross-slot
	// WATCH), for error messages.
	other     []byte
	otherSlot int
}

var errMalformed = fmt.Errorf("%w: cannot split it into commands", errPipeline)

// nextCommand cuts the first command off buf (a Pipeline's encoding):
// the command's bytes, its argument count and the rest.
func nextCommand(buf []byte) (cmd []byte, argc int, rest []byte, err error) {
	if len(buf) < 4 || buf[0] != '*' {
		return nil, 0, nil, errMalformed
	}
	i := bytes.IndexByte(buf, '\r')
	if i < 2 || i+1 >= len(buf) {
		return nil, 0, nil, errMalformed
	}
	argc, ok := parseLen(buf[1:i])
	if !ok {
		return nil, 0, nil, errMalformed
	}
	p := i + 2
	for range argc {
		_, next, ok := nextArg(buf[p:])
		if !ok {
			return nil, 0, nil, errMalformed
		}
		p += next
	}
	return buf[:p], argc, buf[p:], nil
}

// nextArg reads one "$len\r\ndata\r\n" argument: the data and the length
// of its encoding.
func nextArg(b []byte) (arg []byte, n int, ok bool) {
	if len(b) < 4 || b[0] != '$' {
		return nil, 0, false
	}
	i := bytes.IndexByte(b, '\r')
	if i < 2 {
		return nil, 0, false
	}
	l, ok := parseLen(b[1:i])
	if !ok || i+2+l+2 > len(b) {
		return nil, 0, false
	}
	return b[i+2 : i+2+l], i + 2 + l + 2, true
}

// args iterates over a command's arguments, the name first.
type args struct{ b []byte }

func newArgs(cmd []byte) args {
	i := bytes.IndexByte(cmd, '\n')
	return args{cmd[i+1:]}
}

func (a *args) next() ([]byte, bool) {
	v, n, ok := nextArg(a.b)
	if !ok {
		return nil, false
	}
	a.b = a.b[n:]
	return v, true
}

// upper copies s upper-cased into buf (truncated), for matching command
// names without allocating.
func upper(buf *[24]byte, s []byte) []byte {
	n := copy(buf[:], s)
	for i := range n {
		if c := buf[i]; 'a' <= c && c <= 'z' {
			buf[i] = c - 'a' + 'A'
		}
	}
	return buf[:n]
}

// routeOf finds a command's routing key(s) by the rules of korvet's
// Redis Cluster design: EVAL/EVALSHA/FCALL the numkeys keys, XREAD and
// XREADGROUP the keys after STREAMS, WATCH all arguments, XGROUP, XINFO,
// OBJECT and MEMORY USAGE the third argument, DEL/UNLINK/EXISTS/TOUCH
// every argument; known server commands are keyless; otherwise the
// second argument.
func routeOf(cmd []byte, argc int) route {
	r := route{slot: -1, otherSlot: -1}
	a := newArgs(cmd)
	name, _ := a.next()
	var nb, sb [24]byte
	switch string(upper(&nb, name)) {
	case "MULTI":
		r.kind = keysMulti
		return r
	case "EXEC", "DISCARD":
		r.kind = keysClose
		return r
	case "UNWATCH", "WAIT", "WAITAOF", "PING", "ECHO", "INFO", "SCRIPT", "CLIENT", "CLUSTER",
		"ASKING", "READONLY", "READWRITE", "AUTH", "HELLO", "SELECT", "QUIT", "RESET", "TIME",
		"DBSIZE", "CONFIG", "COMMAND", "FUNCTION", "FLUSHALL", "FLUSHDB", "LASTSAVE", "SLOWLOG",
		"LATENCY", "DEBUG", "RANDOMKEY", "KEYS", "SCAN", "ROLE", "LOLWUT", "SAVE", "BGSAVE",
		"BGREWRITEAOF", "SHUTDOWN", "MONITOR", "PUBLISH", "SUBSCRIBE", "PSUBSCRIBE", "ACL":
		return r
	case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
		a.next() // script, sha or function
		nk, _ := a.next()
		if n, ok := parseLen(nk); ok && n > 0 {
			r.key, _ = a.next()
			r.kind = keysOne
		}
	case "XREAD", "XREADGROUP":
		for {
			v, ok := a.next()
			if !ok {
				break
			}
			if string(upper(&sb, v)) == "STREAMS" {
				if r.key, ok = a.next(); ok {
					r.kind = keysOne
				}
				break
			}
		}
	case "XGROUP", "XINFO", "OBJECT":
		a.next()
		if k, ok := a.next(); ok {
			r.key, r.kind = k, keysOne
		}
	case "MEMORY":
		if sub, ok := a.next(); ok && string(upper(&sb, sub)) == "USAGE" {
			if k, ok := a.next(); ok {
				r.key, r.kind = k, keysOne
			}
		}
	case "DEL", "UNLINK", "EXISTS", "TOUCH", "WATCH":
		r.kind = keysSum
		if string(upper(&nb, name)) == "WATCH" {
			r.kind = keysAll
		}
		k, ok := a.next()
		if !ok {
			r.kind = keysNone
			return r
		}
		r.key, r.slot = k, slotOf(k)
		for {
			k, ok := a.next()
			if !ok {
				break
			}
			if s := slotOf(k); s != r.slot && r.other == nil {
				r.other, r.otherSlot = k, s
				r.split = r.kind == keysSum
			}
		}
		return r
	default:
		if argc > 1 {
			r.key, _ = a.next()
			r.kind = keysOne
		}
	}
	if r.kind == keysOne {
		r.slot = slotOf(r.key)
	}
	return r
}

// crossSlotError is returned before sending a MULTI block (or a WATCH)
// whose keys are in different slots.
func crossSlotError(k1 []byte, s1 int, k2 []byte, s2 int) error {
	return fmt.Errorf("resp: cluster: a MULTI block's keys must share a slot: %q is in slot %d, %q in slot %d (use a {hash tag})", k1, s1, k2, s2)
}

// unit is what Exec sends and resends as a whole: one keyed command with
// the keyless ones after it, a MULTI ... EXEC block with the WATCH before
// it and a WAIT after it, or one slot's share of a DEL-like command whose
// keys are in several slots.
type unit struct {
	first, n int    // the pipeline's commands [first, first+n)
	raw      []byte // what to send
	cmds     int    // commands in raw
	slot     int    // -1: any master
	key      []byte
	block    bool
	watch    bool // starts with WATCH (a MULTI after it joins)
	part     bool // one slot's share of command first: its integer reply is summed
	ask      string
	hops     int
	done     bool
	out      [][]byte // raw replies, one per command of raw
}

// plan splits p into units, refusing a MULTI block across slots.
func plan(p *Pipeline) ([]*unit, error) {
	var units []*unit
	var last *unit
	inBlock := false
	buf := p.buf
	for i := 0; i < p.n; i++ {
		cmd, argc, rest, err := nextCommand(buf)
		if err != nil {
			return nil, err
		}
		buf = rest
		r := routeOf(cmd, argc)
		extend := func(u *unit) {
			u.raw = u.raw[:len(u.raw)+len(cmd)]
			u.n++
			u.cmds++
		}
		switch {
		case inBlock || r.kind == keysMulti && last != nil && last.watch && !last.block:
			extend(last)
			last.block = true
			if r.kind == keysClose {
				inBlock = false
			} else if r.kind == keysMulti {
				inBlock = true
			}
			if r.kind == keysAll && r.other != nil {
				return nil, crossSlotError(r.key, r.slot, r.other, r.otherSlot)
			}
			if r.slot >= 0 {
				if last.slot >= 0 && last.slot != r.slot {
					return nil, crossSlotError(last.key, last.slot, r.key, r.slot)
				}
				last.slot, last.key = r.slot, r.key
			}
		case r.kind == keysMulti:
			last = &unit{first: i, n: 1, raw: cmd, cmds: 1, slot: -1, block: true}
			units = append(units, last)
			inBlock = true
		case r.split:
			var parts []*unit
			bySlot := map[int]*unit{}
			a := newArgs(cmd)
			name, _ := a.next()
			var keys [][]byte
			for {
				k, ok := a.next()
				if !ok {
					break
				}
				keys = append(keys, k)
			}
			for _, k := range keys {
				s := slotOf(k)
				u := bySlot[s]
				if u == nil {
					u = &unit{first: i, n: 1, cmds: 1, slot: s, key: k, part: true}
					bySlot[s] = u
					parts = append(parts, u)
				}
				u.out = append(u.out, k) // the keys until encoded below
			}
			for _, u := range parts {
				var q Pipeline
				q.Array(1 + len(u.out))
				q.Bulk(name)
				for _, k := range u.out {
					q.Bulk(k)
				}
				u.raw, u.out = q.buf, nil
			}
			units = append(units, parts...)
			last = parts[len(parts)-1]
		case (r.kind == keysNone || r.kind == keysClose) && last != nil && !last.part:
			extend(last)
		case r.kind == keysNone || r.kind == keysClose:
			slot := -1
			if last != nil {
				slot = last.slot
			}
			last = &unit{first: i, n: 1, raw: cmd, cmds: 1, slot: slot}
			units = append(units, last)
		default:
			if r.kind == keysAll && r.other != nil {
				return nil, crossSlotError(r.key, r.slot, r.other, r.otherSlot)
			}
			last = &unit{first: i, n: 1, raw: cmd, cmds: 1, slot: r.slot, key: r.key, watch: r.kind == keysAll}
			units = append(units, last)
		}
	}
	return units, nil
}

// redirect is a parsed MOVED, ASK, TRYAGAIN or CLUSTERDOWN reply.
type redirect struct {
	kind string
	slot int
	addr string
}

// redirectOf parses a redirect error reply; ok is false for any other
// reply.
func redirectOf(r Reply) (redirect, bool) {
	if !isRedirectReply(r) {
		return redirect{}, false
	}
	d := r.Data
	switch d[0] {
	case 'T':
		return redirect{kind: "TRYAGAIN"}, true
	case 'C':
		return redirect{kind: "CLUSTERDOWN"}, true
	}
	f := bytes.Fields(d)
	if len(f) != 3 {
		return redirect{}, false
	}
	s, err := strconv.Atoi(string(f[1]))
	if err != nil || s < 0 || s >= SlotCount {
		return redirect{}, false
	}
	return redirect{kind: string(f[0]), slot: s, addr: string(f[2])}, true
}

// isRedirectReply reports a MOVED, ASK, TRYAGAIN or CLUSTERDOWN reply
// without allocating.
func isRedirectReply(r Reply) bool {
	if r.Type != redcon.Error {
		return false
	}
	d := r.Data
	return bytes.HasPrefix(d, []byte("MOVED ")) || bytes.HasPrefix(d, []byte("ASK ")) ||
		bytes.HasPrefix(d, []byte("TRYAGAIN")) || bytes.HasPrefix(d, []byte("CLUSTERDOWN"))
}
