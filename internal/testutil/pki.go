package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
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

// PKI is a throw-away certificate authority with a server certificate (for
// 127.0.0.1, localhost and ServerName) and a client certificate, written
// as PEM files for configurations that name files.
type PKI struct {
	ServerName string
	// CAFile is the CA certificate; CA the pool holding it.
	CAFile string
	CA     *x509.CertPool
	// Server is the server's certificate and key, also written to
	// ServerCertFile and ServerKeyFile.
	Server                        tls.Certificate
	ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile are the client's certificate and key.
	ClientCertFile, ClientKeyFile string
	// ClientKeyPEM is the client key's content (tests check it never leaks).
	ClientKeyPEM string
}

// NewPKI generates a PKI under t.TempDir(). ECDSA P-256 keeps it fast.
func NewPKI(t testing.TB, serverName string) *PKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "vllm_exporter test CA " + serverName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{ServerName: serverName, CA: x509.NewCertPool(), CAFile: filepath.Join(dir, "ca.pem")}
	p.CA.AddCert(caCert)
	writePEM(t, p.CAFile, "CERTIFICATE", caDER)

	issue := func(serial int64, usage x509.ExtKeyUsage, dns []string, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		key := newKey(t)
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: "vllm_exporter test " + usageName(usage)},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			DNSNames:     dns,
			IPAddresses:  ips,
		}, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	srvDER, srvKey := issue(2, x509.ExtKeyUsageServerAuth, []string{serverName, "localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback})
	p.Server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	p.ServerCertFile, p.ServerKeyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	writePEM(t, p.ServerCertFile, "CERTIFICATE", srvDER)
	writeKey(t, p.ServerKeyFile, srvKey)

	cliDER, cliKey := issue(3, x509.ExtKeyUsageClientAuth, nil, nil)
	p.ClientCertFile = filepath.Join(dir, "client.pem")
	p.ClientKeyFile = filepath.Join(dir, "client-key.pem")
	writePEM(t, p.ClientCertFile, "CERTIFICATE", cliDER)
	p.ClientKeyPEM = writeKey(t, p.ClientKeyFile, cliKey)
	return p
}

// writeKey writes key as PEM to path and returns the PEM.
func writeKey(t testing.TB, path string, key *ecdsa.PrivateKey) string {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, path, "EC PRIVATE KEY", der)
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

// ServerTLS is a server configuration that presents the server
// certificate and, with requireClientCert, refuses clients without a
// certificate the CA signed.
func (p *PKI) ServerTLS(requireClientCert bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.Server}, MinVersion: tls.VersionTLS12}
	if requireClientCert {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = p.CA
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageClientAuth {
		return "client"
	}
	return "server"
}
