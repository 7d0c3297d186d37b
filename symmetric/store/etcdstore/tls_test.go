package etcdstore

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
)

// testPKI is a CA and the certificates it issued, as PEM files.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

// writePKI creates a CA, a server certificate for 127.0.0.1 and a client
// certificate in a temporary directory.
func writePKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "intranode test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
		return path
	}
	issue := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		require.NoError(t, err)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "PRIVATE KEY", keyDER)
	}
	p := testPKI{ca: write("ca.pem", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = issue("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = issue("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// An etcd that wants mutual TLS and a password: the URL's cacert, cert,
// key and user reach it, and missing any of them is refused.
func TestTLSAndAuth(t *testing.T) {
	pki := writePKI(t)
	srv := startServer(t, func(cfg *embed.Config) {
		u, err := url.Parse("https://127.0.0.1:0")
		require.NoError(t, err)
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*u}, []url.URL{*u}
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: pki.serverCert, KeyFile: pki.serverKey, TrustedCAFile: pki.ca,
			ClientCertAuth: true}
		cfg.BcryptCost = 4 // bcrypt's minimum: passwords are checked on every test connection
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Turn authentication on, as an operator would.
	adminTLS, err := transport.TLSInfo{CertFile: pki.clientCert, KeyFile: pki.clientKey, TrustedCAFile: pki.ca}.ClientConfig()
	require.NoError(t, err)
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + srv.endpoint}, TLS: adminTLS, Logger: zap.NewNop()})
	require.NoError(t, err)
	_, err = admin.UserAdd(ctx, "root", "s3cret")
	require.NoError(t, err)
	_, err = admin.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = admin.AuthEnable(ctx)
	require.NoError(t, err)
	require.NoError(t, admin.Close())

	files := fmt.Sprintf("cacert=%s&cert=%s&key=%s", pki.ca, pki.clientCert, pki.clientKey)
	t.Run("password from the environment", func(t *testing.T) {
		t.Setenv(EnvPassword, "s3cret")
		st, err := store.Open(ctx, fmt.Sprintf("etcd://root@%s%s?%s&member=rank0", srv.endpoint, freshPrefix(), files))
		require.NoError(t, err)
		defer st.Close()
		require.NoError(t, st.Set(ctx, "k", []byte("secure")))
		v, err := st.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, "secure", string(v))
		members, err := st.(*Store).Members(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"rank0"}, members)
	})
	t.Run("wrong password", func(t *testing.T) {
		_, err := store.Open(ctx, fmt.Sprintf("etcd://root:wrong@%s%s?%s", srv.endpoint, freshPrefix(), files))
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
		require.ErrorContains(t, err, "authentication failed")
	})
	refused := func(t *testing.T, raw string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := store.Open(ctx, raw)
		require.Error(t, err)
		require.True(t, errors.Is(err, backend.ErrTimeout) || errors.Is(err, backend.ErrUnavailable), "%v", err)
	}
	t.Run("no client certificate", func(t *testing.T) {
		t.Parallel() // each waits out its deadline
		refused(t, fmt.Sprintf("etcd://root:s3cret@%s%s?cacert=%s", srv.endpoint, freshPrefix(), pki.ca))
	})
	t.Run("no tls", func(t *testing.T) {
		t.Parallel() // each waits out its deadline
		refused(t, fmt.Sprintf("etcd://root:s3cret@%s%s", srv.endpoint, freshPrefix()))
	})
}
