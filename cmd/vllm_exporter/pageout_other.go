//go:build !linux

package main

import "errors"

// releaseBinaryPages is Linux-only (MADV_PAGEOUT); elsewhere the pages stay.
func releaseBinaryPages() (beforeKiB, afterKiB int64, err error) {
	return -1, -1, errors.New("not supported on this platform")
}
