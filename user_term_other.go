//go:build !linux

package main

import (
	"io"
	"os"
)

// readHidden only hides input on Linux; elsewhere the password is read
// from stdin as a line (pipe it in).
func readHidden(*os.File, io.Writer, string, string) (string, bool, error) {
	return "", false, nil
}
