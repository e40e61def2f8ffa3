package profiles

import (
	"syscall"
	"time"
)

// processCPUTime is the process's CPU time so far, user and system, from
// getrusage(RUSAGE_SELF): what top shows, GC and every thread included.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
