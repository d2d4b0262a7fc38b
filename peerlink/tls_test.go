package peerlink

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/url"
	"testing"
	"time"
)

// testPKI is a cluster CA that issues node certificates.
type testPKI struct {
	certificate *x509.Certificate
	key         *ecdsa.PrivateKey
	pool        *x509.CertPool
}

func newTestPKI(t *testing.T, name string) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certificate, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(certificate)
	return &testPKI{certificate: certificate, key: key, pool: pool}
}

// issue signs a node certificate carrying uris, for both server and
// client authentication.
func (pki *testPKI) issue(t *testing.T, uris ...*url.URL) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	template := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "node"}, URIs: uris,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, template, pki.certificate, &key.PublicKey, pki.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func tlsCluster(t *testing.T, pki *testPKI, n int) []*testNode {
	return startCluster(t, n, func(config *Config) {
		config.TLS = &TLSConfig{Certificate: pki.issue(t, NodeURI(config.Cluster, config.Node)), CA: pki.pool}
	})
}

func TestTLSClusterExchangesMessages(t *testing.T) {
	pki := newTestPKI(t, "cluster CA")
	nodes := tlsCluster(t, pki, 3)
	eventually(t, "every pair is connected", allConnected(nodes))
	for _, from := range nodes {
		for _, to := range nodes {
			if from != to {
				exchange(t, from, to, uint64(from.id))
			}
		}
	}
	if status := nodes[0].link.Status(); !status.TLS {
		t.Fatalf("status does not say TLS: %+v", status)
	}
}

// greetOverTLS dials address with certificate, claims to be sender and
// returns the acceptor's answer.
func greetOverTLS(t *testing.T, address string, certificate tls.Certificate, sender NodeID) (hello, error) {
	t.Helper()
	conn, err := tls.Dial("tcp", address, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{certificate},
		InsecureSkipVerify: true}) // this raw client does not care who answers
	if err != nil {
		return hello{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(hello{version: protocolVersion, sender: sender, receiver: 2, cluster: "test"}.encode()); err != nil {
		return hello{}, err
	}
	return readHello(conn)
}

func TestTLSRefusesCertificatesThatDoNotNameThePeer(t *testing.T) {
	pki := newTestPKI(t, "cluster CA")
	nodes := tlsCluster(t, pki, 3)
	eventually(t, "every pair is connected", allConnected(nodes))
	two, three := nodes[1], nodes[2]

	t.Run("this node's own certificate names another node", func(t *testing.T) {
		config := testConfig("test", 2, listen(t, "127.0.0.1:0"), nil)
		config.Handler = func(NodeID, uint64, []byte) {}
		config.TLS = &TLSConfig{Certificate: pki.issue(t, NodeURI("test", 3)), CA: pki.pool}
		if _, err := New(config); !errors.Is(err, ErrConfig) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("dialer claims a node its certificate does not name", func(t *testing.T) {
		answer, err := greetOverTLS(t, two.link.Addr().String(), pki.issue(t, NodeURI("test", 3)), 1)
		if err != nil || answer.refusal != refusalIdentity {
			t.Fatalf("answer %+v, %v", answer, err)
		}
	})
	t.Run("certificate of another cluster", func(t *testing.T) {
		answer, err := greetOverTLS(t, two.link.Addr().String(), pki.issue(t, NodeURI("elsewhere", 1)), 1)
		if err != nil || answer.refusal != refusalIdentity {
			t.Fatalf("answer %+v, %v", answer, err)
		}
	})
	t.Run("certificate from another CA", func(t *testing.T) {
		stranger := newTestPKI(t, "another CA")
		answer, err := greetOverTLS(t, two.link.Addr().String(), stranger.issue(t, NodeURI("test", 1)), 1)
		if err != nil || answer.refusal != refusalIdentity {
			t.Fatalf("answer %+v, %v", answer, err)
		}
	})
	t.Run("certificate with two node names", func(t *testing.T) {
		answer, err := greetOverTLS(t, two.link.Addr().String(), pki.issue(t, NodeURI("test", 1), NodeURI("test", 3)), 1)
		if err != nil || answer.refusal != refusalIdentity {
			t.Fatalf("answer %+v, %v", answer, err)
		}
	})
	t.Run("acceptor's certificate names another node", func(t *testing.T) {
		// Node 1 believes node 2 is at node 3's address: node 3's
		// certificate gives it away before any greeting is sent.
		config := testConfig("test", 1, listen(t, "127.0.0.1:0"), map[NodeID]string{2: three.link.Addr().String()})
		config.TLS = &TLSConfig{Certificate: pki.issue(t, NodeURI("test", 1)), CA: pki.pool}
		confused := startNode(t, config)
		eventually(t, "the dialer refuses node 3's certificate", func() bool {
			err := peerStatus(confused.link, 2).LastError
			return errors.Is(err, ErrIdentity) && !errors.Is(err, ErrRefused)
		})
	})
	t.Run("plaintext dialer", func(t *testing.T) {
		before := two.link.Status().InboundRefused
		if _, err := greet(t, two.link.Addr().String(), hello{version: protocolVersion, sender: 1, receiver: 2, cluster: "test"}.encode()); err == nil {
			t.Fatal("a plaintext greeting was answered by a TLS node")
		}
		eventually(t, "the refusal is counted", func() bool { return two.link.Status().InboundRefused > before })
	})
}

func TestCertificateIdentityParsesOnlyWellFormedNames(t *testing.T) {
	cases := map[string]bool{
		"ironbus-node://edge-1/7": true, "ironbus-node://edge-1/07": false, "ironbus-node://edge-1/": false,
		"ironbus-node://edge-1/4294967296": false, "ironbus-node://edge 1/7": false, "ironbus-node:///7": false,
	}
	for text, valid := range cases {
		uri, err := url.Parse(text)
		if err != nil {
			if valid {
				t.Fatalf("%s: %v", text, err)
			}
			continue
		}
		cluster, node, err := CertificateIdentity(&x509.Certificate{URIs: []*url.URL{uri}})
		if (err == nil) != valid || (valid && (cluster != "edge-1" || node != 7)) {
			t.Errorf("%s: %q %d %v", text, cluster, node, err)
		}
	}
}
