package main

import "testing"

// A port alone listens on loopback; a host given is kept.
func TestMetricsListenAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":             "",
		":9464":        "127.0.0.1:9464",
		"9464":         "127.0.0.1:9464",
		"0.0.0.0:9464": "0.0.0.0:9464",
		"[::1]:9464":   "[::1]:9464",
		"localhost:0":  "localhost:0",
	} {
		got, err := metricsListenAddr(in)
		if err != nil || got != want {
			t.Errorf("metricsListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"nope", "host:", "1.2.3.4:99999", ":http"} {
		if got, err := metricsListenAddr(bad); err == nil {
			t.Errorf("metricsListenAddr(%q) = %q, want an error", bad, got)
		}
	}
}
