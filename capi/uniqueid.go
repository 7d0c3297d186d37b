package capi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
)

// UniqueIDSize is the size of a UniqueID, as NCCL's ncclUniqueId.
const UniqueIDSize = 128

// UniqueID names one group's rendezvous: the address of the store that
// the process that made it serves, the store's secret, and a fresh key
// prefix. It is plain bytes, copied between the ranks' processes by the
// caller (MPI, a file, an environment variable), as ncclUniqueId is.
type UniqueID [UniqueIDSize]byte

// The layout of a UniqueID: magic, version, port, IPv4 address, secret,
// prefix; the rest is zero.
const (
	idMagic     = "INID"
	idVersion   = 1
	idSecretLen = 32
	idPrefixLen = 16
)

// servers holds the stores this process serves for the ids it made, by
// prefix, with the number of comms of this process using each: the
// registry that keeps a store alive for as long as its group may need it.
// A store is closed when the last comm of this process made from its id is
// destroyed; one no comm of this process uses lives until the process ends.
var servers = struct {
	sync.Mutex
	m map[string]*servedID
}{m: map[string]*servedID{}}

type servedID struct {
	srv   *store.Server
	users int
}

// NewUniqueID starts a store on the loopback interface, served by this
// process, and returns the id that names it.
func NewUniqueID() (UniqueID, error) {
	var id UniqueID
	secret := make([]byte, idSecretLen)
	prefix := make([]byte, idPrefixLen)
	if _, err := rand.Read(secret); err != nil {
		return id, backend.Wrap(backend.CodeInternal, err, "intranode: unique id: random secret")
	}
	if _, err := rand.Read(prefix); err != nil {
		return id, backend.Wrap(backend.CodeInternal, err, "intranode: unique id: random prefix")
	}
	srv, err := store.ListenTCP("127.0.0.1:0", store.WithSecret(secret))
	if err != nil {
		return id, err
	}
	_, portText, _ := net.SplitHostPort(srv.Addr())
	port, _ := strconv.Atoi(portText)
	copy(id[:], idMagic)
	id[4] = idVersion
	binary.BigEndian.PutUint16(id[6:], uint16(port))
	copy(id[8:12], net.IPv4(127, 0, 0, 1).To4())
	copy(id[12:], secret)
	copy(id[12+idSecretLen:], prefix)
	servers.Lock()
	servers.m[hex.EncodeToString(prefix)] = &servedID{srv: srv}
	servers.Unlock()
	return id, nil
}

// parse checks an id and returns the store's address, secret and prefix.
func (id UniqueID) parse() (addr string, secret []byte, prefix string, err error) {
	if !bytes.Equal(id[:4], []byte(idMagic)) {
		return "", nil, "", backend.Errorf(backend.CodeInvalidArgument,
			"intranode: not a unique id made by intranodeGetUniqueId (magic %q)", id[:4])
	}
	if id[4] != idVersion {
		return "", nil, "", backend.Errorf(backend.CodeInvalidArgument,
			"intranode: unique id of version %d, this library reads version %d", id[4], idVersion)
	}
	port := binary.BigEndian.Uint16(id[6:])
	addr = net.JoinHostPort(net.IP(id[8:12]).String(), strconv.Itoa(int(port)))
	secret = bytes.Clone(id[12 : 12+idSecretLen])
	prefix = hex.EncodeToString(id[12+idSecretLen : 12+idSecretLen+idPrefixLen])
	return addr, secret, prefix, nil
}

// openStore dials the store an id names and returns it under the id's
// prefix, and a release function that closes the server when this process
// serves it and no other comm of this process uses it.
func openStore(ctx context.Context, id UniqueID, opts ...store.Option) (store.Store, func(), error) {
	addr, secret, prefix, err := id.parse()
	if err != nil {
		return nil, nil, err
	}
	servers.Lock()
	s := servers.m[prefix]
	if s != nil {
		s.users++
	}
	servers.Unlock()
	release := func() {
		if s == nil {
			return
		}
		servers.Lock()
		s.users--
		last := s.users == 0
		if last {
			delete(servers.m, prefix)
		}
		servers.Unlock()
		if last {
			_ = s.srv.Close()
		}
	}
	c, err := store.DialTCP(ctx, addr, append(opts, store.WithSecret(secret))...)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("intranode: the store of the unique id: %w", err)
	}
	p, err := store.NewPrefixed(c, "intranode/"+prefix)
	if err != nil {
		_ = c.Close()
		release()
		return nil, nil, err
	}
	return closingView{p, c}, release, nil
}

// closingView is a prefixed view whose Close also closes the client under
// it.
type closingView struct {
	*store.Prefixed
	c store.Store
}

// Close closes the view, then the client.
func (v closingView) Close() error { return errors.Join(v.Prefixed.Close(), v.c.Close()) }
