package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// retryableConnect says whether waiting may help: the server is not up yet.
// Authentication and TLS problems will not go away.
func retryableConnect(err error) bool {
	return !isAuthError(err) && !isTLSError(err)
}

// isAuthError recognises the server's refusal of the credentials, also of
// credentials that expired or were revoked while connected. The client library
// returns its ErrAuth... values from a connect, but a connection's LastError is the
// server's own text ("nats: User Authentication Expired"), which they do not match.
func isAuthError(err error) bool {
	s := strings.ToLower(err.Error())
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) ||
		strings.Contains(s, "authorization") || strings.Contains(s, "authentication expired") ||
		strings.Contains(s, "authentication revoked")
}

// isTLSError recognises a failed TLS handshake, a TLS alert from the server, and the
// client library's ErrTLS, which also wraps a server that hangs up right after the
// handshake (as one does that wants a client certificate, depending on timing).
func isTLSError(err error) bool {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.Is(err, nats.ErrTLS) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) ||
		strings.Contains(err.Error(), "tls:")
}

// connectError says why a connection failed and what to check, in one line.
func connectError(f *connFlags, err error) error {
	server := f.server
	switch {
	case isAuthError(err):
		if at, ok := f.credsExpiry(); ok {
			return fmt.Errorf("server %s refused the credentials: the user JWT in %s (--creds or $NATS_CREDS) expired at %s; get new credentials",
				server, f.creds, at.UTC().Format(time.RFC3339))
		}
		if s := strings.ToLower(err.Error()); strings.Contains(s, "expired") || strings.Contains(s, "revoked") {
			return fmt.Errorf("server %s refused the credentials (%s); %s", server, strings.TrimPrefix(s, "nats: "), f.credentialsHint())
		}
		return fmt.Errorf("server %s refused the credentials (authorization violation); %s", server, f.credentialsHint())
	case errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Errorf("server %s does not offer TLS; use a nats:// URL, or enable TLS on the server", server)
	case isTLSError(err):
		return fmt.Errorf("TLS with server %s failed: %v; %s", server, err, f.tlsHint(err))
	case errors.Is(err, nats.ErrNoServers):
		if f.wait > 0 {
			return fmt.Errorf("cannot connect to %s: no server answered within --wait %s", server, f.wait)
		}
		return fmt.Errorf("cannot connect to %s: no server is reachable there (is it running? set --server or NATS_URL, or --wait for it)", server)
	}
	return fmt.Errorf("cannot connect to %s: %v", server, err)
}

// credentialsHint names the credentials workq presented, for the user to check, or
// says it presented none.
func (f *connFlags) credentialsHint() string {
	var given []string
	if f.creds != "" {
		given = append(given, "the credentials file "+f.creds+" (--creds or $NATS_CREDS)")
	}
	if f.nkey != "" {
		given = append(given, "the nkey seed file "+f.nkey+" (--nkey or $NATS_NKEY)")
	}
	if f.user != "" || f.password != "" {
		given = append(given, "--user and --password ($NATS_USER, $NATS_PASSWORD)")
	}
	if f.token != "" {
		given = append(given, "--token ($NATS_TOKEN)")
	}
	if len(given) == 0 {
		return "workq gave none: give --user and --password, --token, --creds or --nkey"
	}
	return "check " + strings.Join(given, " and ")
}

// credsExpiry says when the user JWT of --creds expired, if it has. A server
// refuses an expired JWT at connect with a plain authorization violation (it says
// "expired" only of a connection whose JWT expires while it is up), so workq looks.
func (f *connFlags) credsExpiry() (time.Time, bool) {
	if f.creds == "" {
		return time.Time{}, false
	}
	b, err := os.ReadFile(f.creds)
	if err != nil {
		return time.Time{}, false
	}
	claims, err := userClaims(b)
	if err != nil || claims.Expires == 0 || time.Now().Unix() < claims.Expires {
		return time.Time{}, false
	}
	return time.Unix(claims.Expires, 0), true
}

// tlsHint says what to check after a failed TLS handshake. A server that refuses
// the client's certificate (or its lack of one) sends a TLS alert, which reaches Go
// only as text ("remote error: tls: ..."), or, depending on timing, the client sees
// it hang up after the handshake.
func (f *connFlags) tlsHint(err error) string {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	refused := strings.Contains(err.Error(), "remote error: tls:") || closedAfterHandshake(err)
	switch {
	case errors.As(err, &ua) && f.tlsCA == "":
		return "the server's certificate is not signed by a CA this system trusts: give its CA with --tls-ca ($NATS_CA)"
	case errors.As(err, &ua):
		return "the server's certificate is not signed by --tls-ca " + f.tlsCA + ": give the CA that signed it"
	case errors.As(err, &hn):
		return "the server's certificate is not for this host: connect with a name or address it names"
	case refused && f.tlsCert == "":
		return "the server wants a client certificate: give --tls-cert and --tls-key ($NATS_CERT, $NATS_KEY)"
	case refused:
		return "the server refused the client certificate " + f.tlsCert + " (--tls-cert): check that a CA the server trusts signed it"
	}
	return "check --tls-ca, --tls-cert and --tls-key"
}

// closedAfterHandshake says whether the server hung up right after the TLS
// handshake, as one does that wants a client certificate and got none: the client
// library wraps that in ErrTLS.
func closedAfterHandshake(err error) bool {
	return errors.Is(err, nats.ErrTLS) &&
		(errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET))
}

// flagEnv names the environment variable of each connection flag that names a file.
var flagEnv = map[string]string{
	"creds": "NATS_CREDS", "nkey": "NATS_NKEY", "tls-cert": "NATS_CERT", "tls-key": "NATS_KEY", "tls-ca": "NATS_CA",
}

// loginFileError says that the file path of a connection flag cannot be used, and
// why, without repeating the path a file system error names too.
func loginFileError(flag, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("cannot use %s (--%s or $%s): %v", path, flag, flagEnv[flag], err)
}

// interrupted is the error of a connection given up because workq was signalled
// (SIGINT, SIGTERM) while it waited for what.
func interrupted(what string, wait time.Duration) error {
	if wait > 0 {
		return fmt.Errorf("interrupted while waiting for %s (--wait %s)", what, wait)
	}
	return fmt.Errorf("interrupted while waiting for %s", what)
}
