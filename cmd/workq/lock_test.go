package main

import (
	"testing"
	"time"

	"github.com/workq/workq/kvlock"
)

// lockRunWith is valid lock run flags (the defaults) changed by change.
func lockRunWith(change func(f *lockRunFlags)) *lockRunFlags {
	f := &lockRunFlags{lockFlags: &lockFlags{bucket: kvlock.DefaultBucket}, name: "L", argv: []string{"true"},
		waitFlags: waitFlags{ttl: kvlock.DefaultTTL}, grace: 5 * time.Second, conflictExit: 1}
	change(f)
	return f
}

func TestLockRunValidate(t *testing.T) {
	t.Parallel()
	checkValidate(t, []validateCase{
		{"defaults", lockRunWith(func(*lockRunFlags) {}), ""},
		{"shortest lease, a timeout, no grace", lockRunWith(func(f *lockRunFlags) { f.ttl, f.timeout, f.grace = kvlock.MinTTL, time.Second, 0 }), ""},
		{"conflict exit 0", lockRunWith(func(f *lockRunFlags) { f.conflictExit = 0 }), ""},
		{"conflict exit 255", lockRunWith(func(f *lockRunFlags) { f.conflictExit = 255 }), ""},
		{"lease below the minimum", lockRunWith(func(f *lockRunFlags) { f.ttl = 49 * time.Millisecond }), "--ttl 49ms: want at least 50ms"},
		{"negative timeout", lockRunWith(func(f *lockRunFlags) { f.timeout = -time.Second }), "--timeout -1s: want ≥ 0 (0: as long as it takes)"},
		{"conflict exit 256", lockRunWith(func(f *lockRunFlags) { f.conflictExit = 256 }), "--conflict-exit 256: want 0 to 255"},
		{"negative conflict exit", lockRunWith(func(f *lockRunFlags) { f.conflictExit = -1 }), "--conflict-exit -1: want 0 to 255"},
		{"negative kill grace", lockRunWith(func(f *lockRunFlags) { f.grace = -time.Second }), "--kill-grace -1s: want ≥ 0"},
	})
}

func TestLockAcquireValidate(t *testing.T) {
	t.Parallel()
	lf := &lockFlags{bucket: kvlock.DefaultBucket}
	checkValidate(t, []validateCase{
		{"defaults", &lockAcquireFlags{lockFlags: lf, name: "L", waitFlags: waitFlags{ttl: 30 * time.Second}}, ""},
		{"no lease", &lockAcquireFlags{lockFlags: lf, name: "L"}, "--ttl 0s: want at least 50ms"},
		{"negative timeout", &lockAcquireFlags{lockFlags: lf, name: "L", waitFlags: waitFlags{ttl: time.Minute, timeout: -time.Millisecond}},
			"--timeout -1ms: want ≥ 0 (0: as long as it takes)"},
	})
}

func TestLockReleaseValidate(t *testing.T) {
	t.Parallel()
	lf := &lockFlags{bucket: kvlock.DefaultBucket}
	const want = "give --token (from 'workq lock acquire') or --force"
	checkValidate(t, []validateCase{
		{"token", &lockReleaseFlags{lockFlags: lf, name: "L", token: 7}, ""},
		{"force", &lockReleaseFlags{lockFlags: lf, name: "L", force: true}, ""},
		{"neither", &lockReleaseFlags{lockFlags: lf, name: "L"}, want},
		{"both", &lockReleaseFlags{lockFlags: lf, name: "L", token: 7, force: true}, want},
	})
}
