package sowdb_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sowdb "github.com/sowdb/sowdb/clients/go"
	"github.com/sowdb/sowdb/clients/go/internal/sowdtest"
)

// The security options (SPEC §11) against a live sowd with TLS and token users: WithTLS with the
// server's CA, WithToken sent as "authorization: Bearer TOKEN"; no token or a wrong one is
// UNAUTHENTICATED, a role's row entitlement holds.

func TestTokenAndTLS(t *testing.T) {
	dir := t.TempDir()
	ca := selfSigned(t, dir)
	hash := func(token string) string { h := sha256.Sum256([]byte(token)); return hex.EncodeToString(h[:]) }
	users := fmt.Sprintf("[[user]]\nname = \"ann\"\ntoken_sha256 = \"%s\"\nroles = [\"fx\"]\n"+
		"[[user]]\nname = \"etl\"\ntoken_sha256 = \"%s\"\nroles = [\"loader\"]\n", hash("s3cret"), hash("l0ader"))
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	security := fmt.Sprintf(`
[security]
tls_cert = %q
tls_key = %q
users_file = %q

[[role]]
name = "fx"
read = ["orders"]
write = ["orders"]
filter = "/desk = 'FX'"

[[role]]
name = "loader"
write = ["orders"]
`, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "users.toml"))
	srv := sowdtest.Start(t, sowdtest.Options{Config: sowdtest.TestConfig(t) + security})
	ctx := timeout(t, 30*time.Second)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	tlsConfig := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}

	loader := newClient(t, srv.Address, sowdb.WithTLS(tlsConfig), sowdb.WithToken("l0ader"))
	if _, err := loader.Publish(ctx, "orders", []any{map[string]any{"orderId": 1, "desk": "FX"}, map[string]any{"orderId": 2, "desk": "EQ"}}, nil); err != nil {
		t.Fatal(err)
	}
	ann := newClient(t, srv.Address, sowdb.WithTLS(tlsConfig), sowdb.WithToken("s3cret"))
	rows, err := ann.SowAll(ctx, "orders", sowdb.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("ann sees %d rows; want FX's order 1 only", len(rows))
	}
	if doc, err := rows[0].Doc(); err != nil || doc["orderId"] != 1.0 || doc["desk"] != "FX" {
		t.Fatalf("ann sees %s (%v); want FX's order 1", rows[0].Data, err)
	}
	if _, err := ann.SowAll(ctx, "quotes", sowdb.Query{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("ann queries quotes: %v, want PERMISSION_DENIED", err)
	}
	for _, token := range []string{"", "wrong"} {
		opts := []sowdb.Option{sowdb.WithTLS(tlsConfig)}
		if token != "" {
			opts = append(opts, sowdb.WithToken(token))
		}
		c := newClient(t, srv.Address, opts...)
		if _, err := c.ListTopics(ctx); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("token %q: %v, want UNAUTHENTICATED", token, err)
		}
	}
	plain := newClient(t, srv.Address, sowdb.WithToken("s3cret"))
	if _, err := plain.ListTopics(timeout(t, 3*time.Second)); err == nil {
		t.Fatal("a plaintext client was served by the TLS port")
	}
}

// selfSigned writes cert.pem and key.pem for 127.0.0.1 and localhost into dir; the certificate
// is its own CA.
func selfSigned(t *testing.T, dir string) *x509.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDer, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, kind string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("cert.pem", "CERTIFICATE", der)
	write("key.pem", "PRIVATE KEY", keyDer)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
