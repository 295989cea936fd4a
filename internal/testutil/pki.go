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
	// issue makes a key and a certificate of tmpl signed by the CA (by
	// itself while there is none), writes name.pem and name-key.pem, and
	// returns the certificate's DER, the key and the key's PEM.
	var caCert *x509.Certificate
	var caKey *ecdsa.PrivateKey
	issue := func(name string, tmpl *x509.Certificate) ([]byte, *ecdsa.PrivateKey, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.Subject = pkix.Name{CommonName: "vllm_exporter test " + name + " " + serverName}
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
		parent, signer := caCert, caKey
		if parent == nil {
			parent, signer = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
		for file, data := range map[string][]byte{name + ".pem": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), name + "-key.pem": keyPEM} {
			if err := os.WriteFile(filepath.Join(dir, file), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return der, key, string(keyPEM)
	}
	caDER, key, _ := issue("ca", &x509.Certificate{SerialNumber: big.NewInt(1), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature})
	var err error
	if caCert, err = x509.ParseCertificate(caDER); err != nil {
		t.Fatal(err)
	}
	caKey = key
	p := &PKI{ServerName: serverName, CA: x509.NewCertPool(), CAFile: filepath.Join(dir, "ca.pem")}
	p.CA.AddCert(caCert)
	srvDER, srvKey, _ := issue("server", &x509.Certificate{SerialNumber: big.NewInt(2), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSNames: []string{serverName, "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}})
	p.Server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	p.ServerCertFile, p.ServerKeyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	_, _, p.ClientKeyPEM = issue("client", &x509.Certificate{SerialNumber: big.NewInt(3), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	p.ClientCertFile, p.ClientKeyFile = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	return p
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
