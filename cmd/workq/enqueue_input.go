package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
)

// lineBatch is lines read from the input, each with its newline, and the error
// that ended the input (io.EOF at its end) if it ended.
type lineBatch struct {
	lines [][]byte
	err   error
}

// readLines reads r on a goroutine of its own, so that the reader of the batches
// can give up on input that blocks (a terminal, a pipe nobody closes) when it is
// interrupted. A batch holds what was read without blocking, up to a few hundred
// lines; the last one carries the error that ended the input. The goroutine ends at
// the end of the input or, once the read under way returns, when stop is closed.
func readLines(r io.Reader, stop <-chan struct{}) <-chan lineBatch {
	ch := make(chan lineBatch, 4)
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		var b lineBatch
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				b.lines = append(b.lines, line)
			}
			b.err = err
			if err != nil || len(b.lines) >= 256 || br.Buffered() == 0 {
				select {
				case ch <- b:
				case <-stop:
					return
				}
				b = lineBatch{}
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// readAll reads r to its end, or until ctx ends.
func readAll(ctx context.Context, r io.Reader) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		ch <- result{b, err}
	}()
	select {
	case res := <-ch:
		return res.b, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// input opens --file, or stdin for "" and "-".
func (a *app) input(file string) (io.Reader, func(), error) {
	if file == "" || file == "-" {
		return a.stdin, func() {}, nil
	}
	fh, err := os.Open(file)
	if err != nil {
		return nil, nil, fmt.Errorf("open --file: %w", err)
	}
	if st, err := fh.Stat(); err == nil && st.IsDir() {
		fh.Close()
		return nil, nil, fmt.Errorf("--file %s is a directory", file)
	}
	return fh, func() { fh.Close() }, nil
}

// countLines counts non-empty lines of a regular file for the progress bar; -1 if unknown.
func countLines(path string) int64 {
	fh, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		return -1
	}
	var n int64
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			n++
		}
	}
	if sc.Err() != nil {
		return -1
	}
	return n
}
