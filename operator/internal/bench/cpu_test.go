package bench

import (
	"fmt"
	"os"
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
