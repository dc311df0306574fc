package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The linker drops the exported methods nothing calls unless a reachable
// function may call any method by reflection (reflect's Method or
// MethodByName with a non-constant argument, or a type embedding
// reflect.Type, whose promoted wrappers do): then it keeps every exported
// method of every type in an interface, which made korvet's binary 6.7 MB
// (21%) bigger while reflect2 (under hamba/avro) embedded reflect.Type
// (issue 20, footprint). -dumpdep prints the linker's reachability edges
// and marks such functions <ReflectMethod>; this test fails on any, with
// the edges that reached it.
func TestLinkerDeadCodeElimination(t *testing.T) {
	if testing.Short() {
		t.Skip("links korvet (-short)")
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-dumpdep", "-o", os.DevNull, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	var marked []string
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, "<ReflectMethod>") && len(marked) < 20 {
			marked = append(marked, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the linker's output: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go build -ldflags=-dumpdep: %v", err)
	}
	if len(marked) > 0 {
		t.Fatalf("a reachable function calls methods by reflection, so the linker keeps every exported method "+
			"(find what reaches it in go build -ldflags=-dumpdep):\n%s", strings.Join(marked, "\n"))
	}
}
