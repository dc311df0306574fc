//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"unsafe"
)

// readHidden reads a password from terminal f without echo, asking twice
// (once when again is "": a login, not a new password). isTerm is false when f is not a terminal (nothing is read then).
func readHidden(f *os.File, prompt io.Writer, ask, again string) (pw string, isTerm bool, err error) {
	fd := f.Fd()
	var old syscall.Termios
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCGETS, uintptr(unsafe.Pointer(&old))); e != 0 {
		return "", false, nil
	}
	quiet := old
	quiet.Lflag &^= syscall.ECHO
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCSETS, uintptr(unsafe.Pointer(&quiet))); e != 0 {
		return "", true, fmt.Errorf("turn off terminal echo: %w", e)
	}
	restore := func() { syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCSETS, uintptr(unsafe.Pointer(&old))) }
	defer restore()
	// Ctrl-C must not leave the terminal without echo.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer func() { signal.Stop(sig); close(sig) }()
	go func() {
		if _, ok := <-sig; ok {
			restore()
			fmt.Fprintln(prompt)
			os.Exit(130)
		}
	}()

	br := bufio.NewReader(f)
	read := func(p string) (string, error) {
		fmt.Fprint(prompt, p)
		line, err := br.ReadString('\n')
		fmt.Fprintln(prompt)
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		return strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), nil
	}
	first, err := read(ask)
	if err != nil {
		return "", true, fmt.Errorf("read password: %w", err)
	}
	if first == "" {
		return "", true, errors.New("empty password")
	}
	if again == "" {
		return first, true, nil
	}
	second, err := read(again)
	if err != nil {
		return "", true, fmt.Errorf("read password: %w", err)
	}
	if first != second {
		return "", true, errors.New("the passwords differ")
	}
	return first, true, nil
}
