package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// retryableConnect says whether waiting may help: the server is not up yet.
// Authentication and TLS problems will not go away.
func retryableConnect(err error) bool {
	return !errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrAuthExpired) &&
		!strings.Contains(strings.ToLower(err.Error()), "authorization") && !isTLSError(err)
}

func isTLSError(err error) bool {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) ||
		strings.Contains(err.Error(), "tls:")
}

// connectError says why a connection failed and what to do about it, in one line.
func connectError(server string, err error, wait time.Duration) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization"):
		return fmt.Errorf("server %s refused the credentials (authorization violation); check --user/--password, --token, --creds or --nkey", server)
	case errors.Is(err, nats.ErrAuthExpired):
		return fmt.Errorf("server %s: credentials expired", server)
	case isTLSError(err):
		return fmt.Errorf("TLS with server %s failed: %v; check --tls-ca, --tls-cert and --tls-key", server, err)
	case errors.Is(err, nats.ErrNoServers):
		if wait > 0 {
			return fmt.Errorf("cannot connect to %s: no server answered within --wait %s", server, wait)
		}
		return fmt.Errorf("cannot connect to %s: no server is reachable there (is it running? set --server or NATS_URL, or --wait for it)", server)
	}
	return fmt.Errorf("cannot connect to %s: %v", server, err)
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
