//go:build unix

package dataset

import (
	"syscall"
	"time"
)

// cpuSeconds is the CPU time (user and system) the process has used.
func cpuSeconds() float64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()).Seconds()
}
