package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// CertificateAuthority issues certificates for tests and for the
// throwaway broker `ironbus bench` starts; a production deployment
// brings its own PKI.
type CertificateAuthority struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte
}

// NewCertificateAuthority makes a self-signed ECDSA P-256 CA valid for
// lifetime from now.
func NewCertificateAuthority(name string, lifetime time.Duration) (*CertificateAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("security: CA key: %w", err)
	}
	template := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(lifetime),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("security: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("security: CA certificate: %w", err)
	}
	return &CertificateAuthority{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// LeafSpec describes a certificate to issue.
type LeafSpec struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	URIs       []*url.URL
	NotBefore  time.Time // default: a minute ago
	NotAfter   time.Time // default: a day from now
	Client     bool      // client authentication instead of server
}

// Issue signs a leaf certificate and returns it and its key, PEM-encoded.
func (ca *CertificateAuthority) Issue(spec LeafSpec) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("security: leaf key: %w", err)
	}
	if spec.NotBefore.IsZero() {
		spec.NotBefore = time.Now().Add(-time.Minute)
	}
	if spec.NotAfter.IsZero() {
		spec.NotAfter = time.Now().Add(24 * time.Hour)
	}
	usage := x509.ExtKeyUsageServerAuth
	if spec.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	template := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: spec.CommonName},
		DNSNames: spec.DNSNames, IPAddresses: spec.IPs, URIs: spec.URIs, NotBefore: spec.NotBefore, NotAfter: spec.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("security: leaf certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("security: leaf key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// WritePair writes name.crt and name.key (0600) into dir.
func WritePair(dir, name string, certPEM, keyPEM []byte) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("security: %w", err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("security: %w", err)
	}
	return certFile, keyFile, nil
}

// LocalhostPair makes a CA and a server certificate for localhost and
// 127.0.0.1 in dir, returning the CA file and the pair.
func LocalhostPair(dir string) (caFile, certFile, keyFile string, err error) {
	ca, err := NewCertificateAuthority("ironbus throwaway CA", 24*time.Hour)
	if err != nil {
		return "", "", "", err
	}
	caFile = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		return "", "", "", fmt.Errorf("security: %w", err)
	}
	certPEM, keyPEM, err := ca.Issue(LeafSpec{CommonName: "localhost", DNSNames: []string{"localhost"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}})
	if err != nil {
		return "", "", "", err
	}
	certFile, keyFile, err = WritePair(dir, "server", certPEM, keyPEM)
	return caFile, certFile, keyFile, err
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}
