package kvlock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/testenv"
)

type permit struct{ sent, acked time.Time }

// worstWindow returns the most permits certainly granted within any window of
// length w. A permit was granted by the server somewhere between its request being
// sent and its reply arriving, so every permit whose whole [sent, acked] interval
// lies inside [t, t+w) was certainly granted in that window.
func worstWindow(ps []permit, w time.Duration) int {
	slices.SortFunc(ps, func(a, b permit) int { return a.sent.Compare(b.sent) })
	worst := 0
	for i := range ps {
		end := ps[i].sent.Add(w)
		count := 0
		for _, p := range ps[i:] {
			if !p.sent.Before(end) {
				break
			}
			if p.acked.Before(end) {
				count++
			}
		}
		worst = max(worst, count)
	}
	return worst
}

func checkWindows(t *testing.T, ps []permit, n int, w time.Duration) {
	t.Helper()
	worst := worstWindow(ps, w)
	if worst > n {
		t.Errorf("%d permits within one %s window (limit %d)", worst, w, n)
	}
	t.Logf("at most %d permits in any %s window (limit %d)", worst, w, n)
}

// The window check itself can fail.
func TestWorstWindow(t *testing.T) {
	t.Parallel()
	base := time.Now()
	at := func(ms int) permit {
		s := base.Add(time.Duration(ms) * time.Millisecond)
		return permit{s, s.Add(time.Millisecond)}
	}
	ps := []permit{at(0), at(10), at(600), at(610), at(1200)}
	if got := worstWindow(ps, 500*time.Millisecond); got != 2 {
		t.Fatalf("worst %d, want 2", got)
	}
	ps = append(ps, at(620))
	if got := worstWindow(ps, 500*time.Millisecond); got != 3 {
		t.Fatalf("worst %d, want 3", got)
	}
}

// runLimiter has three connections with several goroutines each ask for permits as
// fast as the limiter admits them for d, and returns the permits granted.
func runLimiter(t *testing.T, env *testenv.Env, name string, n int, w, d time.Duration, useAllow bool) []permit {
	t.Helper()
	ctx := testenv.Context(t, d+30*time.Second)
	var (
		mu  sync.Mutex
		ps  []permit
		wg  sync.WaitGroup
		end = time.Now().Add(d)
	)
	for range 3 {
		l := newTestLocker(t, env.JetStream(t))
		lim, err := l.Limiter(ctx, name, n, w)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					sent := time.Now()
					if useAllow {
						ok, after, err := lim.Allow(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						if !ok {
							if after <= 0 || after > w {
								t.Errorf("retryAfter %s outside (0, %s]", after, w)
							}
							time.Sleep(after) // back off as told
							continue
						}
					} else {
						wctx, cancel := context.WithDeadline(ctx, end)
						err := lim.Wait(wctx)
						cancel()
						if err != nil {
							if errors.Is(err, context.DeadlineExceeded) {
								return
							}
							t.Error(err)
							return
						}
					}
					mu.Lock()
					ps = append(ps, permit{sent, time.Now()})
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return ps
}

// n permits per window over many windows across three connections: never more than
// n in any window, and close to n per window under high demand.
func TestLimiterNPerWindow(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	const n, w, d = 5, 500 * time.Millisecond, 3 * time.Second
	ps := runLimiter(t, env, "api", n, w, d, false)
	checkWindows(t, ps, n, w)
	max := n * int(d/w)
	t.Logf("%d permits in %s (ideal ≈ %d)", len(ps), d, max)
	if len(ps) < max*7/10 {
		t.Errorf("only %d permits in %s, want close to %d", len(ps), d, max)
	}
}

// The shortest window, with Allow and its retry hint. The server's expiry check runs
// at most every 250 ms, so a permit frees between one window and one window plus
// 250 ms after its grant: throughput lies between n per 2×MinWindow and n per window.
func TestLimiterMinWindowAllow(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	const n, w, d = 2, MinWindow, 2 * time.Second
	ps := runLimiter(t, env, "fast", n, w, d, true)
	checkWindows(t, ps, n, w)
	ideal := n * int(d/w)
	t.Logf("%d permits in %s (ideal ≈ %d)", len(ps), d, ideal)
	if len(ps) < ideal/2 {
		t.Errorf("only %d permits in %s, want at least half of %d", len(ps), d, ideal)
	}
}

// A window shorter than the server's 250 ms expiry check is refused with an error
// that says why, rather than silently admitting about n per 250 ms.
func TestLimiterWindowBelowExpiryCheck(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	l := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 20*time.Second)
	for _, w := range []time.Duration{100 * time.Millisecond, MinWindow - time.Millisecond} {
		_, err := l.Limiter(ctx, "short", 5, w)
		if !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("window %s: %v, want ErrInvalidOption", w, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "at least 250ms") || !strings.Contains(msg, "5 per 250ms") {
			t.Errorf("window %s: error %q does not say the floor and its effect", w, msg)
		}
	}
	if _, err := l.Limiter(ctx, "short", 5, MinWindow); err != nil {
		t.Fatalf("window MinWindow: %v", err)
	}
	_, err := l.Limiter(ctx, "short", 5, 100*time.Millisecond)
	t.Logf("example: %v", err)
}

func TestLimiterConfigAndErrors(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	l := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 20*time.Second)
	lim, err := l.Limiter(ctx, "cfg", 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if lim.Name() != "cfg" || lim.Rate() != 2 || lim.Window() != time.Second {
		t.Fatalf("limiter %s %d %s", lim.Name(), lim.Rate(), lim.Window())
	}
	if _, err := l.Limiter(ctx, "cfg", 2, time.Second); err != nil {
		t.Fatalf("same limiter again: %v", err)
	}
	if _, err := l.Limiter(ctx, "cfg", 3, time.Second); !errors.Is(err, ErrLimiterConfig) {
		t.Fatalf("other rate: %v, want ErrLimiterConfig", err)
	}
	for range 2 {
		if ok, _, err := lim.Allow(ctx); !ok || err != nil {
			t.Fatalf("Allow: %v %v", ok, err)
		}
	}
	ok, after, err := lim.Allow(ctx)
	if ok || err != nil || after <= 0 || after > time.Second {
		t.Fatalf("third Allow: ok %v after %s err %v; want rejected with a retry hint", ok, after, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := lim.Wait(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait beyond its deadline: %v", err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, _, err := lim.Allow(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Allow with a cancelled context: %v", err)
	}
	if err := lim.Wait(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context: %v", err)
	}
	for _, tc := range []struct {
		name string
		n    int
		w    time.Duration
		want error
	}{
		{"", 1, time.Second, ErrInvalidName},
		{"a.b", 1, time.Second, ErrInvalidName},
		{"a b", 1, time.Second, ErrInvalidName},
		{"ok", 0, time.Second, ErrInvalidOption},
		{"ok", -1, time.Second, ErrInvalidOption},
		{"ok", 1, 0, ErrInvalidOption},
		{"ok", 1, -time.Second, ErrInvalidOption},
		{"ok", 1, 50 * time.Millisecond, ErrInvalidOption},
		{"ok", 1, MinWindow - 1, ErrInvalidOption},
	} {
		if _, err := l.Limiter(ctx, tc.name, tc.n, tc.w); !errors.Is(err, tc.want) {
			t.Errorf("Limiter(%q, %d, %s): %v, want %v", tc.name, tc.n, tc.w, err, tc.want)
		}
	}
}

// A request that Wait sends again after losing its reply carries the same message
// id, so the server answers it with the permit the first one took: one Wait never
// takes two permits.
func TestLimiterRetriedRequestTakesOnePermit(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	l := newTestLocker(t, env.JetStream(t))
	ctx := testenv.Context(t, 20*time.Second)
	lim, err := l.Limiter(ctx, "retry", 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for try := range 3 { // the first "reply lost", then asked again twice
		if ok, _, err := lim.allow(ctx, "wait-1"); !ok || err != nil {
			t.Fatalf("try %d of the same request: ok %v err %v; want admitted", try, ok, err)
		}
	}
	if ok, _, err := lim.allow(ctx, "wait-2"); !ok || err != nil {
		t.Fatalf("second request: ok %v err %v; want the second permit", ok, err)
	}
	if ok, _, err := lim.allow(ctx, "wait-3"); ok || err != nil {
		t.Fatalf("third request: ok %v err %v; want rejected (2 per window)", ok, err)
	}
}
