//go:build unix

package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// MaxRSS is this process's peak resident set size in bytes, or 0 if it cannot be
// read. On Linux it is VmHWM from /proc/self/status, the high-water mark of this
// program's own memory: getrusage's ru_maxrss is not, because Linux carries it
// across exec, so a child started by a big parent (the bench process holding the
// embedded server) would report the parent's size. Elsewhere, getrusage.
func MaxRSS() int64 {
	if f, err := os.Open("/proc/self/status"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss) // bytes there
	}
	return int64(ru.Maxrss) * 1024 // kilobytes on Linux and the BSDs
}
