//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseBinaryPages asks the kernel to reclaim the exporter's own
// read-only executable pages (MADV_PAGEOUT, Linux 5.4+), and returns the
// resident file-backed KiB before and after.
//
// Why: when the executable is in the page cache, as it is right after the
// image is pulled, the kernel maps almost all of it into the process during
// start-up (fault-around maps whole 64 KiB windows around every page the
// runtime's initialisation touches). Those pages count in RSS and in the
// container's memory working set, yet a serving exporter uses about two
// thirds of them. Paging them out once after start-up leaves the working
// set; pages needed later fault back in from the image. The kernel skips
// pages that another process also maps, so nothing is taken from them, and
// an older kernel's EINVAL leaves the process as it was.
func releaseBinaryPages() (beforeKiB, afterKiB int64, err error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, 0, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, 0, err
	}
	beforeKiB = rssFileKiB()
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// 00400000-00b52000 r-xp 00000000 fd:00 1234 /path/to/exe
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != exe || f[1][1] == 'w' {
			continue // not ours, or written data (anonymous once touched)
		}
		start, end, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		lo, err1 := strconv.ParseUint(start, 16, 64)
		hi, err2 := strconv.ParseUint(end, 16, 64)
		if err1 != nil || err2 != nil || hi <= lo {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(lo), uintptr(hi-lo), unix.MADV_PAGEOUT); errno != 0 {
			return beforeKiB, rssFileKiB(), fmt.Errorf("madvise(MADV_PAGEOUT) %s: %w", f[0], errno)
		}
	}
	return beforeKiB, rssFileKiB(), nil
}

// rssFileKiB is the process's resident file-backed memory (RssFile in
// /proc/self/status), or -1 where the kernel does not report it.
func rssFileKiB() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
