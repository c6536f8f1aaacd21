package main

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress is a progress bar on a terminal and nothing elsewhere, so that pipes and
// CI logs stay clean. max < 0 is an unknown total (a counter with a spinner).
type progress struct {
	bar *progressbar.ProgressBar
}

func newProgress(w io.Writer, max int64, desc string) *progress {
	if !isTerminal(w) {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("jobs"),
		progressbar.OptionThrottle(80*time.Millisecond),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionUseANSICodes(true),
	)}
}

func (p *progress) add(n int) {
	if p.bar != nil {
		_ = p.bar.Add(n)
	}
}

func (p *progress) set(n int) {
	if p.bar != nil {
		_ = p.bar.Set(n)
	}
}

// clear removes the bar from the screen so a line can be printed; the next add
// draws it again.
func (p *progress) clear() {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
