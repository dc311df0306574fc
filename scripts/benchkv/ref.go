package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/korvet/korvet/resp"
)

// serve runs the reference of the GET figures: a minimal net/http handler
// that answers every request with the same -size bytes, until killed or
// -timeout. With -xrange it first reads one entry of the topic's streams
// with XRANGE (a random offset of a random partition, through a plain
// resp.Client, one round trip per request): the least I/O korvet's GET
// does, in the least code, the floor of korvet's HTTP path on this
// machine.
func serve(ctx context.Context, o options) error {
	body := value(o.size, 0)
	length := strconv.Itoa(len(body))
	read, err := refReader(ctx, o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if read != nil {
				if err := read(r.Context()); err != nil {
					http.Error(w, err.Error(), http.StatusServiceUnavailable)
					return
				}
			}
			w.Header().Set("Content-Length", length)
			_, _ = w.Write(body)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	what := ""
	if read != nil {
		what = " after one XRANGE of " + o.topic
	}
	fmt.Printf("reference handler on %s, %d B answers%s\n", ln.Addr(), len(body), what)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// refReader returns the reference handler's read, nil without -redis:
// an XRANGE of one entry at a random offset of one of the topic's
// streams (the first segment of each partition, as a fresh topic has).
func refReader(ctx context.Context, o options) (func(context.Context) error, error) {
	if !o.xrange {
		return nil, nil
	}
	rc, err := resp.New(o.redisURL, resp.Options{PoolSize: o.concurrency + 1})
	if err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		rc.Close()
	}()
	type stream struct {
		key  string
		size int64
	}
	var streams []stream
	for p := range o.partitions {
		key := "korvet:storage:local:" + o.topic + ":" + strconv.Itoa(p) + ":0"
		r, err := rc.Do(ctx, "XLEN", key)
		if err != nil {
			return nil, fmt.Errorf("XLEN %s: %w", key, err)
		}
		if n, _ := r.Int(); n > 0 {
			streams = append(streams, stream{key, n})
		}
	}
	if len(streams) == 0 {
		return nil, fmt.Errorf("no entries in the streams of %s", o.topic)
	}
	return func(ctx context.Context) error {
		s := streams[rand.IntN(len(streams))]
		off := rand.Int64N(s.size)
		var pl resp.Pipeline
		pl.Array(6)
		pl.String("XRANGE")
		pl.String(s.key)
		pl.Int(off)
		pl.Int(off)
		pl.String("COUNT")
		pl.Int(1)
		rs, err := rc.Exec(ctx, &pl)
		if err != nil {
			return err
		}
		defer rs.Release()
		if rs.At(0).Len() != 1 {
			return fmt.Errorf("XRANGE %s %d: %d entries", s.key, off, rs.At(0).Len())
		}
		return nil
	}, nil
}

// cpuProc names a process whose CPU time -cpu reports.
type cpuProc struct {
	name string
	pid  int
}

func parseCPU(s string) ([]cpuProc, error) {
	if s == "" {
		return nil, nil
	}
	var out []cpuProc
	for _, f := range strings.Split(s, ",") {
		name, pid, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not name=pid", f)
		}
		out = append(out, cpuProc{name, n})
	}
	return append(out, cpuProc{"loadgen", os.Getpid()}), nil
}

// ticksPerSecond is USER_HZ, 100 on every Linux Go runs on.
const ticksPerSecond = 100

// cpuTimes reads utime+stime of each process, in ticks (-1: unreadable),
// then the machine's idle and steal ticks (all CPUs, /proc/stat): what
// nobody here used, and what the hypervisor gave to other machines.
func cpuTimes(ps []cpuProc) []int64 {
	return append(procTicks(ps), machineTicks()...)
}

func procTicks(ps []cpuProc) []int64 {
	out := make([]int64, len(ps), len(ps)+2)
	for i, p := range ps {
		out[i] = -1
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces: fields start after its ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 == nil && err2 == nil {
			out[i] = u + st
		}
	}
	return out
}

// machineTicks returns the idle and steal ticks of /proc/stat's cpu line
// (-1, -1: unreadable).
func machineTicks() []int64 {
	b, err := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if err != nil || len(f) < 9 || f[0] != "cpu" {
		return []int64{-1, -1}
	}
	idle, err1 := strconv.ParseInt(f[4], 10, 64)
	steal, err2 := strconv.ParseInt(f[8], 10, 64)
	if err1 != nil || err2 != nil {
		return []int64{-1, -1}
	}
	return []int64{idle, steal}
}

func printCPU(what string, ps []cpuProc, before, after []int64) {
	if len(ps) == 0 {
		return
	}
	var total int64
	for i := range ps {
		if before[i] >= 0 && after[i] >= 0 {
			total += after[i] - before[i]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CPU during %s: %.2f s in all;", what, float64(total)/ticksPerSecond)
	for i, p := range ps {
		d := after[i] - before[i]
		if before[i] < 0 || after[i] < 0 {
			fmt.Fprintf(&b, " %s ?", p.name)
			continue
		}
		fmt.Fprintf(&b, " %s %.2f s (%.0f%%)", p.name, float64(d)/ticksPerSecond, 100*float64(d)/float64(max(total, 1)))
	}
	if n := len(ps); len(before) == n+2 && len(after) == n+2 && before[n] >= 0 && after[n] >= 0 {
		fmt.Fprintf(&b, "; machine idle %.2f s, steal %.2f s", float64(after[n]-before[n])/ticksPerSecond, float64(after[n+1]-before[n+1])/ticksPerSecond)
	}
	fmt.Println(b.String())
}

// startPerf starts perf record on -perf-pid; the returned func stops it
// and waits for it to write its file.
func startPerf(o options) (func() error, error) {
	if o.perfPID == 0 {
		return func() error { return nil }, nil
	}
	cmd := exec.Command("perf", "record", "-F", "999", "-g", "-p", strconv.Itoa(o.perfPID), "-o", o.perfOut)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("perf record: %w", err)
	}
	// perf attaches to the process's threads before it samples.
	time.Sleep(300 * time.Millisecond)
	return func() error {
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			return fmt.Errorf("stop perf: %w", err)
		}
		// perf writes its file, then dies of the SIGINT it was sent.
		var ee *exec.ExitError
		if err := cmd.Wait(); err != nil && !(errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT) {
			return fmt.Errorf("perf record: %w", err)
		}
		return nil
	}, nil
}
