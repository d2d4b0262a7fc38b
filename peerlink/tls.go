package peerlink

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// NodeURIScheme is the scheme of the URI SAN that names a node in its
// certificate: ironbus-node://<cluster id>/<node id>.
const NodeURIScheme = "ironbus-node"

// alpnProtocol keeps a peer link's TLS apart from the client protocol's:
// a client that reaches the peer port fails at the handshake.
const alpnProtocol = "ironbus-peer/1"

// TLSConfig turns on TLS 1.3 with mutual authentication. Each node's
// certificate must chain to CA and carry exactly one URI SAN
// NodeURI(cluster, node); it is used as the server certificate when the
// node accepts and as the client certificate when it dials, so it needs
// both the server and client extended key usages (or none). The node and
// cluster ids a peer claims in its greeting must be the ones its
// certificate names; host names and IP SANs play no part.
type TLSConfig struct {
	Certificate tls.Certificate
	CA          *x509.CertPool
}

// NodeURI is the URI SAN that names node of cluster in a certificate.
func NodeURI(cluster string, node NodeID) *url.URL {
	return &url.URL{Scheme: NodeURIScheme, Host: cluster, Path: "/" + strconv.FormatUint(uint64(node), 10)}
}

// CertificateIdentity returns the cluster and node a certificate names
// through its one ironbus-node URI SAN. ErrIdentity when it names none,
// several, or a malformed one.
func CertificateIdentity(certificate *x509.Certificate) (cluster string, node NodeID, err error) {
	found := 0
	for _, uri := range certificate.URIs {
		if uri.Scheme != NodeURIScheme {
			continue
		}
		found++
		cluster = uri.Host
		digits := strings.TrimPrefix(uri.Path, "/")
		value, parseErr := strconv.ParseUint(digits, 10, 32)
		if parseErr != nil || digits != strconv.FormatUint(value, 10) || validClusterID(cluster) != nil {
			return "", 0, fmt.Errorf("%w: malformed node URI %q", ErrIdentity, uri.String())
		}
		node = NodeID(value)
	}
	switch found {
	case 0:
		return "", 0, fmt.Errorf("%w: no %s:// URI in the certificate of %q", ErrIdentity, NodeURIScheme, certificate.Subject.CommonName)
	case 1:
		return cluster, node, nil
	default:
		return "", 0, fmt.Errorf("%w: %d node URIs in one certificate", ErrIdentity, found)
	}
}

// validClusterID keeps cluster ids to what a URI host carries verbatim.
func validClusterID(cluster string) error {
	if cluster == "" || len(cluster) > MaxClusterIDBytes {
		return fmt.Errorf("%w: cluster id must have 1 to %d bytes", ErrConfig, MaxClusterIDBytes)
	}
	for _, c := range cluster {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return fmt.Errorf("%w: cluster id %q: only letters, digits, '-', '.' and '_'", ErrConfig, cluster)
		}
	}
	return nil
}

// leaf returns the parsed leaf of a certificate chain.
func leaf(certificate tls.Certificate) (*x509.Certificate, error) {
	if certificate.Leaf != nil {
		return certificate.Leaf, nil
	}
	if len(certificate.Certificate) == 0 {
		return nil, fmt.Errorf("%w: TLS certificate is empty", ErrConfig)
	}
	parsed, err := x509.ParseCertificate(certificate.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%w: TLS certificate: %w", ErrConfig, err)
	}
	return parsed, nil
}

// serverConfig is the acceptor's TLS: the dialer must present a
// certificate. Its chain and the node it names are checked after the TLS
// handshake, when the greeting says which node it claims to be, so that a
// refusal travels to the dialer as a typed reason instead of a bare TLS
// alert; nothing but the greeting is read before that check.
func (t *TLSConfig) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{t.Certificate},
		NextProtos:   []string{alpnProtocol},
		ClientAuth:   tls.RequireAnyClientCert,
	}
}

// clientConfig is the dialer's TLS: the acceptor must present a server
// certificate that chains to the CA. Host names are not checked (peers
// are named by node id, not by DNS): VerifyConnection checks the chain and
// the handshake checks the node the certificate names.
func (t *TLSConfig) clientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{t.Certificate},
		NextProtos:         []string{alpnProtocol},
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		VerifyConnection: func(state tls.ConnectionState) error {
			_, _, err := t.verifyPeer(state, x509.ExtKeyUsageServerAuth)
			return err
		},
	}
}

// verifyPeer checks the peer's chain against the cluster CA for usage and
// returns the identity its leaf names.
func (t *TLSConfig) verifyPeer(state tls.ConnectionState, usage x509.ExtKeyUsage) (string, NodeID, error) {
	if len(state.PeerCertificates) == 0 {
		return "", 0, fmt.Errorf("%w: the peer presented no certificate", ErrIdentity)
	}
	intermediates := x509.NewCertPool()
	for _, certificate := range state.PeerCertificates[1:] {
		intermediates.AddCert(certificate)
	}
	peerLeaf := state.PeerCertificates[0]
	options := x509.VerifyOptions{Roots: t.CA, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{usage}}
	if _, err := peerLeaf.Verify(options); err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrIdentity, err)
	}
	return CertificateIdentity(peerLeaf)
}
