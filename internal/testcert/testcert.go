// Package testcert makes TLS certificates for tests, valid for an hour and written
// as PEM files: a self-signed certificate for 127.0.0.1 and localhost, or a private
// certificate authority (CA) that signs server and client certificates. Only tests
// import it.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// SelfSigned writes a new self-signed certificate and its private key as PEM files in
// a temporary directory of the test, and returns their paths and a pool that trusts
// the certificate (which is its own CA: the certificate file serves as a CA file too).
func SelfSigned(t testing.TB) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	tmpl := template("workq test")
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"}
	key := newKey(t)
	cert, certFile, keyFile := issue(t, tmpl, tmpl, key, key)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// CA is a private certificate authority: its certificate, in File (PEM) and in Pool,
// signs the server and client certificates it issues. Two CAs trust nothing of each
// other's.
type CA struct {
	File string         // the CA certificate, PEM: a --tls-ca or ca_file
	Pool *x509.CertPool // trusts the CA certificate alone

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA named name and writes its certificate in a temporary directory of
// the test.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	tmpl := template(name)
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	key := newKey(t)
	cert, certFile, _ := issue(t, tmpl, tmpl, key, key)
	ca := &CA{File: certFile, Pool: x509.NewCertPool(), cert: cert, key: key}
	ca.Pool.AddCert(cert)
	return ca
}

// Server issues a server certificate for 127.0.0.1 and localhost signed by the CA,
// and returns the PEM files of the certificate and its private key.
func (ca *CA) Server(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	tmpl := template("workq test server")
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"}
	_, certFile, keyFile = issue(t, tmpl, ca.cert, newKey(t), ca.key)
	return certFile, keyFile
}

// Client issues a client certificate named name signed by the CA, for mutual TLS,
// and returns the PEM files of the certificate and its private key.
func (ca *CA) Client(t testing.TB, name string) (certFile, keyFile string) {
	t.Helper()
	tmpl := template(name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	_, certFile, keyFile = issue(t, tmpl, ca.cert, newKey(t), ca.key)
	return certFile, keyFile
}

// template is a certificate named name, valid from an hour ago for two hours, with
// a random serial number (certificates of one CA need distinct ones).
func template(name string) *x509.Certificate {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// issue signs tmpl's certificate for key with parent's signer, writes it and key as
// PEM files in a new temporary directory of the test, and returns the certificate
// and the files' paths.
func issue(t testing.TB, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) (cert *x509.Certificate, certFile, keyFile string) {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, certFile, keyFile
}
