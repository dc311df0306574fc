package entry

import "bytes"

// fieldWS holds the whitespace layout of a flattened value that is not
// compact JSON; see the package comment for the marker grammar.
const fieldWS = "__ws"

// Marker forms and the separator between runs.
const (
	wsUniform = 'u'
	wsGeneral = 'g'
	wsSep     = '.'
)

// Slots of a uniform marker, in marker order. The order puts the runs
// common producers use first, so that trailing empty runs can be left out.
const (
	slotAfterColon  = iota // after every ':'
	slotAfterComma         // after every ','
	slotAfterOpen          // after '{'
	slotBeforeClose        // after the last member's value
	slotTrail              // after '}'
	slotAfterValue         // after every other member's value
	slotBeforeColon        // after every member name
	slotLead               // before '{'
	uniformSlots
)

// runKind names a whitespace position around member i of n.
type runKind uint8

const (
	runLead        runKind = iota // before '{'
	runBeforeName                 // after '{' (i = 0) or after ','
	runBeforeColon                // between the name and ':'
	runAfterColon                 // between ':' and the value
	runAfterValue                 // between the value and ',' or '}'
	runTrail                      // after '}'
)

// layout is a parsed __ws marker: the decoder asks it for each run in
// document order. The zero layout is compact JSON (every run empty).
type layout struct {
	set     bool
	general bool
	marker  []byte
	pos     int // general: start of the next run; len(marker)+1 once all are taken
	uniform [uniformSlots][]byte
	// For a uniform layout, the pieces repeated for every member, built
	// once per marker so that each member costs two appends:
	// V "," S `"` before a name and `"` B ":" A after it.
	comma, colon []byte
	buf          []byte // backs comma and colon; kept between markers
}

// parse loads a marker, reporting whether it is well formed. Runs point
// into marker, which must stay unchanged while the layout is used.
func (l *layout) parse(marker []byte) bool {
	buf := l.buf[:0]
	if cap(buf) > maxKeptScratch {
		buf = nil
	}
	*l = layout{buf: buf}
	if len(marker) == 0 {
		return false
	}
	for _, c := range marker[1:] {
		if c != wsSep && !isSpace(c) {
			return false
		}
	}
	l.set, l.marker = true, marker
	switch marker[0] {
	case wsGeneral:
		l.general, l.pos = true, 1
		return true
	case wsUniform:
		rest := marker[1:]
		for s := 0; ; s++ {
			if s == uniformSlots {
				return false
			}
			i := bytes.IndexByte(rest, wsSep)
			if i < 0 {
				l.uniform[s] = rest
				l.pieces()
				return true
			}
			l.uniform[s], rest = rest[:i], rest[i+1:]
		}
	}
	return false
}

// pieces builds comma and colon of a uniform layout.
func (l *layout) pieces() {
	u := &l.uniform
	b := append(l.buf[:0], u[slotAfterValue]...)
	b = append(append(b, ','), u[slotAfterComma]...)
	b = append(b, '"')
	n := len(b)
	b = append(append(b, '"'), u[slotBeforeColon]...)
	b = append(append(b, ':'), u[slotAfterColon]...)
	l.buf, l.comma, l.colon = b, b[:n:n], b[n:]
}

// run returns the whitespace at position k of member i, last telling
// whether i is the final member. A general layout hands out its runs in
// sequence, so callers must ask in document order; ok is false when a
// general marker has run out.
func (l *layout) run(k runKind, i int, last bool) (ws []byte, ok bool) {
	if !l.set {
		return nil, true
	}
	if l.general {
		if l.pos > len(l.marker) {
			return nil, false
		}
		rest := l.marker[l.pos:]
		n := bytes.IndexByte(rest, wsSep)
		if n < 0 {
			l.pos = len(l.marker) + 1
			return rest, true
		}
		l.pos += n + 1
		return rest[:n], true
	}
	var s int
	switch k {
	case runLead:
		s = slotLead
	case runBeforeName:
		s = slotAfterComma
		if i == 0 {
			s = slotAfterOpen
		}
	case runBeforeColon:
		s = slotBeforeColon
	case runAfterColon:
		s = slotAfterColon
	case runAfterValue:
		s = slotAfterValue
		if last {
			s = slotBeforeClose
		}
	default:
		s = slotTrail
	}
	return l.uniform[s], true
}

// done reports whether a general marker had exactly the runs asked for.
func (l *layout) done() bool {
	return !l.set || !l.general || l.pos == len(l.marker)+1
}

// appendOpen appends what precedes the name of member i: the opening
// brace for the first, else the previous value's trailing run and ','.
func (l *layout) appendOpen(dst []byte, i int) ([]byte, bool) {
	if i > 0 && l.set && !l.general {
		return append(dst, l.comma...), true
	}
	k, sep := runAfterValue, byte(',')
	if i == 0 {
		k, sep = runLead, '{'
	}
	ws, ok := l.run(k, i-1, false)
	dst = append(append(dst, ws...), sep)
	ws, ok2 := l.run(runBeforeName, i, false)
	return append(append(dst, ws...), '"'), ok && ok2
}

// appendColon appends what lies between member i's name and value.
func (l *layout) appendColon(dst []byte, i int) ([]byte, bool) {
	if l.set && !l.general {
		return append(dst, l.colon...), true
	}
	ws, ok := l.run(runBeforeColon, i, false)
	dst = append(append(append(dst, '"'), ws...), ':')
	ws, ok2 := l.run(runAfterColon, i, false)
	return append(dst, ws...), ok && ok2
}

// appendClose appends what follows the last member's value (member n-1).
func (l *layout) appendClose(dst []byte, n int) ([]byte, bool) {
	ws, ok := l.run(runAfterValue, n-1, true)
	dst = append(append(dst, ws...), '}')
	ws, ok2 := l.run(runTrail, n, true)
	return append(dst, ws...), ok && ok2 && l.done()
}

// memberRuns returns the whitespace around member m of a value the
// flattener accepted; see the package comment for the names.
func memberRuns(v []byte, m *member) (beforeName, beforeColon, afterColon, afterValue []byte) {
	n := m.nameStart - 1 // the opening quote
	for n > 0 && isSpace(v[n-1]) {
		n--
	}
	colon := skipSpace(v, m.nameEnd+1)
	return v[n : m.nameStart-1], v[m.nameEnd+1 : colon], v[colon+1 : m.valStart], v[m.valEnd:skipSpace(v, m.valEnd)]
}

// appendMarker appends the marker for v's whitespace to dst, the shortest
// uniform one when every member has the same runs, else the general one.
// It appends nothing when v is compact. ms are v's members (at least one).
func appendMarker(dst, v []byte, ms []member) []byte {
	n := len(ms)
	lead := v[:skipSpace(v, 0)]
	trail := v[skipSpace(v, ms[n-1].valEnd)+1:]
	var slots [uniformSlots][]byte
	slots[slotLead], slots[slotTrail] = lead, trail
	var firstName []byte
	firstName, slots[slotBeforeColon], slots[slotAfterColon], slots[slotBeforeClose] = memberRuns(v, &ms[n-1])
	if n > 1 {
		slots[slotAfterComma] = firstName // the last member's run follows a ','
		firstName, _, _, slots[slotAfterValue] = memberRuns(v, &ms[0])
	}
	slots[slotAfterOpen] = firstName
	uniform, compact := true, true
	for i := range ms {
		bn, bc, ac, av := memberRuns(v, &ms[i])
		if i > 0 && !sameRun(bn, slots[slotAfterComma]) ||
			!sameRun(bc, slots[slotBeforeColon]) || !sameRun(ac, slots[slotAfterColon]) ||
			i < n-1 && !sameRun(av, slots[slotAfterValue]) {
			uniform = false
			break
		}
	}
	for _, s := range slots {
		compact = compact && len(s) == 0
	}
	switch {
	case uniform && compact:
		return dst
	case uniform:
		last := uniformSlots - 1
		for last > 0 && len(slots[last]) == 0 {
			last--
		}
		dst = append(dst, wsUniform)
		for s := 0; s <= last; s++ {
			if s > 0 {
				dst = append(dst, wsSep)
			}
			dst = append(dst, slots[s]...)
		}
		return dst
	}
	dst = append(dst, wsGeneral)
	dst = append(dst, lead...)
	for i := range ms {
		bn, bc, ac, av := memberRuns(v, &ms[i])
		for _, r := range [4][]byte{bn, bc, ac, av} {
			dst = append(append(dst, wsSep), r...)
		}
	}
	dst = append(dst, wsSep)
	return append(dst, trail...)
}

// sameRun is bytes.Equal for the short runs of whitespace it is given,
// without a call per comparison.
func sameRun(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
