//go:build !unix

package bench

// MaxRSS is unknown on this platform: 0.
func MaxRSS() int64 { return 0 }
