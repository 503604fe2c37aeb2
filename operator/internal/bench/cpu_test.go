package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times (100
// on every Linux architecture Go runs on).
const clockTicks = 100

// cpuSeconds is process pid's user and system CPU time so far
// (/proc/pid/stat fields 14 and 15, proc(5)).
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces: count from after it.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, stat)
	}
	return (utime + stime) / clockTicks
}

// machineCPU is the machine's busy and total CPU time so far, in seconds
// summed over its CPUs (/proc/stat's cpu line; idle and iowait are not
// busy).
func machineCPU(b *testing.B) (busy, total float64) {
	b.Helper()
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	for i, field := range strings.Fields(line)[1:] {
		v, err := strconv.ParseFloat(field, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %q", line)
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy / clockTicks, total / clockTicks
}

// busyShare is how busy the machine's CPUs were between two machineCPU
// readings, from 0 to 1.
func busyShare(busy0, total0, busy1, total1 float64) float64 {
	if total1 == total0 {
		return 0
	}
	return (busy1 - busy0) / (total1 - total0)
}

// controlPlaneCPU is the CPU time so far of the benchmark's API server and
// etcd: envtest starts them as this process's children.
func controlPlaneCPU(b *testing.B) float64 {
	b.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		b.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var sum float64
	for _, path := range stats {
		stat, err := os.ReadFile(path)
		if err != nil {
			continue // gone since the glob
		}
		s := string(stat)
		comm := s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')]
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if f[1] != self || (comm != "kube-apiserver" && comm != "etcd") {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(path, "/proc/"), "/stat"))
		sum += cpuSeconds(b, pid)
	}
	return sum
}

// cpuUse is where a phase's CPU went: the operator process, the API
// server and etcd, and this process (vcsim, the benchmark's clients).
type cpuUse struct {
	operator, controlPlane, bench, busy, total float64
}

// sampleCPU reads the counters cpuUse differences; pid 0 is no operator.
func sampleCPU(b *testing.B, pid int) cpuUse {
	b.Helper()
	u := cpuUse{controlPlane: controlPlaneCPU(b), bench: cpuSeconds(b, os.Getpid())}
	if pid != 0 {
		u.operator = cpuSeconds(b, pid)
	}
	u.busy, u.total = machineCPU(b)
	return u
}

// report puts the phase's CPU seconds since u0 and the machine's busy
// share under names prefixed with phase.
func (u cpuUse) report(b *testing.B, phase string, u0 cpuUse) {
	b.ReportMetric(u.operator-u0.operator, phase+"-cpu-s")
	b.ReportMetric(u.controlPlane-u0.controlPlane, phase+"-apiserver-cpu-s")
	b.ReportMetric(u.bench-u0.bench, phase+"-vcsim-cpu-s")
	b.ReportMetric(busyShare(u0.busy, u0.total, u.busy, u.total), phase+"-busy")
}
