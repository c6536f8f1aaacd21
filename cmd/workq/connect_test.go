package main

import "testing"

func TestConnFlagsValidate(t *testing.T) {
	t.Parallel()
	const want = "--tls-cert and --tls-key go together"
	checkValidate(t, []validateCase{
		{"no TLS", &connFlags{server: defaultServer}, ""},
		{"client certificate", &connFlags{server: defaultServer, tlsCert: "c.pem", tlsKey: "k.pem", tlsCA: "ca.pem"}, ""},
		{"CA only", &connFlags{server: defaultServer, tlsCA: "ca.pem"}, ""},
		{"certificate without key", &connFlags{server: defaultServer, tlsCert: "c.pem"}, want},
		{"key without certificate", &connFlags{server: defaultServer, tlsKey: "k.pem"}, want},
	})
}
