package bench

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childGoroutines, when set, is where the operator process writes its
// goroutines, counted by stack, on SIGUSR2: a run with faults whose
// goroutines do not settle prints the stacks that grew since the run
// without faults.
const childGoroutines = "BENCH_GOROUTINES"

// writeGoroutinesOnSignal makes the operator process write its goroutine
// profile (debug=1: one entry per stack, with its count) to path on
// SIGUSR2.
func writeGoroutinesOnSignal(path string) {
	asked := make(chan os.Signal, 1)
	signal.Notify(asked, syscall.SIGUSR2)
	go func() {
		for range asked {
			writeProfile("goroutine", 1, path)
		}
	}()
}

// stacks asks the operator process for its goroutines and returns their
// count by stack (the stack's function lines).
func (c *child) stacks(b *testing.B) map[string]int {
	b.Helper()
	if c.goroutineFile == "" {
		return nil
	}
	_ = os.Remove(c.goroutineFile)
	if err := c.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		b.Fatal(err)
	}
	waitForFile(b, c.goroutineFile)
	data, err := os.ReadFile(c.goroutineFile)
	if err != nil {
		b.Fatal(err)
	}
	return parseStacks(string(data))
}

// parseStacks reads a goroutine profile written with debug=1: a
// "goroutine profile: total N" line, then entries separated by blank
// lines, each "N @ addresses" then "#\taddress function+offset\tfile:line"
// lines.
func parseStacks(profile string) map[string]int {
	out := map[string]int{}
	_, entries, _ := strings.Cut(profile, "\n")
	for entry := range strings.SplitSeq(entries, "\n\n") {
		lines := strings.Split(strings.TrimSpace(entry), "\n")
		count, _, ok := strings.Cut(lines[0], " @ ")
		n, err := strconv.Atoi(count)
		if !ok || err != nil {
			continue
		}
		var frames []string
		for _, l := range lines[1:] {
			if f := strings.Fields(strings.TrimPrefix(l, "#")); len(f) >= 3 {
				frames = append(frames, f[1]+" "+f[len(f)-1])
			}
		}
		out[strings.Join(frames, "\n")] += n
	}
	return out
}

// grownStacks describes the stacks with more goroutines in now than in
// before, most grown first.
func grownStacks(before, now map[string]int) string {
	type grown struct {
		stack string
		by    int
	}
	var gs []grown
	for stack, n := range now {
		if n > before[stack] {
			gs = append(gs, grown{stack, n - before[stack]})
		}
	}
	slices.SortFunc(gs, func(a, b grown) int { return b.by - a.by })
	var sb strings.Builder
	for _, g := range gs {
		fmt.Fprintf(&sb, "+%d goroutines at\n%s\n", g.by, g.stack)
	}
	return sb.String()
}

// parseStacks counts the goroutines of one stack: three parked in
// parkedForTest are one entry of three, and grownStacks names it.
func TestParseStacks(t *testing.T) {
	before := map[string]int{}
	var sb strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&sb, 1); err != nil {
		t.Fatal(err)
	}
	for stack, n := range parseStacks(sb.String()) {
		before[stack] = n
	}
	release := make(chan struct{})
	defer close(release)
	for range 3 {
		go parkedForTest(release)
	}
	var now map[string]int
	for range 100 {
		sb.Reset()
		if err := pprof.Lookup("goroutine").WriteTo(&sb, 1); err != nil {
			t.Fatal(err)
		}
		now = parseStacks(sb.String())
		for stack, n := range now {
			if strings.Contains(stack, "parkedForTest") && n == 3 {
				if grown := grownStacks(before, now); !strings.HasPrefix(grown, "+3 goroutines at\n") || !strings.Contains(grown, "parkedForTest") {
					t.Errorf("grownStacks = %q; want the three parked goroutines first", grown)
				}
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("no stack of three goroutines in parkedForTest among %v", now)
}

func parkedForTest(release chan struct{}) { <-release }
