package store

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"

	"github.com/intranode/intranode/backend"
)

// EnvSecret names the environment variable that holds the per-job secret of
// a TCP store. ListenTCP and DialTCP read it when no WithSecret option is
// given; an unset or empty variable means no secret.
const EnvSecret = "INTRANODE_STORE_SECRET"

// ErrUnauthenticated matches (errors.Is) every failure of the TCP store's
// authentication: a client without the job's secret, a client or server
// whose proof does not match it, or a server that does not authenticate
// talking to a client that has a secret. The error also carries a backend
// code: backend.ErrInvalidArgument when this side's secret is missing or
// refused, backend.ErrPeerFailed when the server failed to prove itself.
var ErrUnauthenticated = errors.New("tcp store: authentication failed")

// The authentication exchange (authHMAC), after the client's hello:
//
//	server -> client  respOK version(u32) authHMAC(u8) serverNonce[32]
//	client -> server  opAuth id 0: clientNonce[32] clientMAC[32]
//	server -> client  respOK id 0: serverMAC[32]     (or respErr, and it hangs up)
//
// clientMAC = HMAC-SHA256(secret, clientLabel || serverNonce || clientNonce)
// serverMAC = HMAC-SHA256(secret, serverLabel || serverNonce || clientNonce)
//
// The server's fresh nonce keeps a recorded client proof from being
// replayed; the client's nonce makes the server's proof fresh for it, so a
// client never sends a key to a server that does not hold the secret. The
// two labels keep an impostor server from reflecting the client's own proof
// back as its answer. Proofs are compared in constant time.
const (
	authHMAC  = 1
	nonceSize = 32
	macSize   = sha256.Size

	clientLabel = "intranode-store-v1 client proof\x00"
	serverLabel = "intranode-store-v1 server proof\x00"
)

// opAuth carries the client's proof. It is not a request: it has id 0 and
// is accepted only as the frame right after the hello.
const opAuth byte = 0x0a

// WithSecret sets the per-job secret that a TCP server demands of its
// clients and that a client proves to its server, overriding EnvSecret.
// Every rank of a job must use the same secret: a server with a secret
// refuses clients without it, and a client with a secret refuses a server
// that does not prove it holds the same one. An empty secret turns
// authentication off even when EnvSecret is set. Use at least 16 random
// bytes (NewSecret makes some): an impostor that gets a client to answer
// its challenge can try to guess a short secret offline.
func WithSecret(secret []byte) Option {
	s := cloneBytes(secret)
	return func(o *options) {
		o.secret, o.secretSet = s, true
	}
}

// NewSecret returns a fresh random secret (32 random bytes as 64 hex
// digits, so it can travel in an environment variable), for a launcher to
// give to every rank of a job.
func NewSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", backend.Wrap(backend.CodeInternal, err, "tcp store: reading random secret")
	}
	return hex.EncodeToString(b[:]), nil
}

// authSecret is the secret in force: the option's, else the environment's;
// nil means none.
func (o *options) authSecret() []byte {
	s := o.secret
	if !o.secretSet {
		s = []byte(os.Getenv(EnvSecret))
	}
	if len(s) == 0 {
		return nil
	}
	return s
}

// newNonce returns nonceSize random bytes.
func newNonce() ([]byte, error) {
	n := make([]byte, nonceSize)
	if _, err := rand.Read(n); err != nil {
		return nil, backend.Wrap(backend.CodeInternal, err, "tcp store: reading random nonce")
	}
	return n, nil
}

// proof is the HMAC one side sends to show it holds secret.
func proof(secret []byte, label string, serverNonce, clientNonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(serverNonce)
	m.Write(clientNonce)
	return m.Sum(nil)
}

// validProof reports, in time independent of where they differ, whether
// got is the proof expected of the side that label names.
func validProof(secret []byte, label string, serverNonce, clientNonce, got []byte) bool {
	return hmac.Equal(got, proof(secret, label, serverNonce, clientNonce))
}
