package collective

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
)

// The call check's mesh. In a job of at most MeshMaxRanks ranks, the
// records of the call check across hosts (hostcheck.go) travel between
// the hosts' CPUs rather than through the devices: every rank holds a TCP
// connection to every other, and the record of each call that crosses
// hosts is queued when the call is enqueued; the mesh's writer sends it to
// each peer (as many queued records as there are in one write).
// HostWork.Synchronize compares the records that arrived with its own.
// Against the records' all-gather on the inter-host engine this costs the
// devices nothing (at 2 hosts × 1 GPU that all-gather, with its copies,
// took about as long as NCCL's own small call and doubled it), names a
// mismatch even where the data step hangs (the records do not wait for the
// device; the sides of a call that took different paths are named too),
// and sees a rank whose process died or closed its groups at once, by its
// connection. It cannot carry a comm's status word, which is known only
// on the device when the step inside the host has run: the hierarchical
// calls keep that all-gather for their status words (among the rail)
// beside the mesh's check.
//
// The connections are formed on the first checked call: every rank
// listens on every interface, publishes its interface addresses and a
// random token through the job's store, dials each peer's addresses at
// once and keeps the first connection whose listener proves to be that
// peer (a hello carrying both ranks' tokens, answered by the listener).
// Each connection carries records one way, from the dialer.

// MeshMaxRanks is the largest job whose call check runs on the mesh:
// each call's record is written to every other rank, so a larger job
// checks on the inter-host engine instead.
const MeshMaxRanks = 16

// meshRing is how many calls' records the mesh keeps per peer: a call
// judged after meshRing later calls of a peer arrived is not judged
// against that peer.
const meshRing = 1024

// meshMagic opens a hello: the protocol and its version.
const meshMagic = "INC1"

const (
	tokenSize = 16
	// helloSize: magic, the listener's token, the dialer's rank and token.
	helloSize = len(meshMagic) + tokenSize + 4 + tokenSize
	helloOK   = 'k'
)

// meshCard is what a rank publishes of its listener.
type meshCard struct {
	Addrs []string `json:"addrs"`
	Token []byte   `json:"token"`
}

// checkMesh is one rank's end of the mesh.
type checkMesh struct {
	rank  int
	cards []meshCard
	ln    net.Listener
	out   []net.Conn // by rank: where this rank writes its records; the writer's once formed
	wg    sync.WaitGroup
	// outq holds the records queued for the writer (write); writing is
	// closed when the writer has ended. Both nil until the mesh is formed.
	outq    chan hostRecord
	writing chan struct{}

	mu      sync.Mutex
	in      []net.Conn     // by rank: the connections its records arrive on
	ring    [][]hostRecord // by rank: its latest records, by seq % meshRing
	gone    []error        // by rank: why its records stopped arriving
	arrived chan struct{}  // closed and replaced when a record arrives or a peer is gone
	joined  chan struct{}  // closed when every peer has connected in
	waiting int            // peers not yet connected in
	closed  bool
}

// formMesh connects rank to every other of world ranks, meeting them in
// st; ctx bounds it, or timeout when ctx has no deadline.
func formMesh(ctx context.Context, st store.Store, rank, world int, timeout time.Duration) (_ *checkMesh, err error) {
	ctx, cancel := withDefaultTimeout(ctx, timeout)
	defer cancel()
	m := &checkMesh{rank: rank, out: make([]net.Conn, world), in: make([]net.Conn, world),
		ring: make([][]hostRecord, world), gone: make([]error, world), arrived: make(chan struct{}),
		joined: make(chan struct{}), waiting: world - 1}
	defer func() {
		if err != nil {
			_ = m.Close()
			err = fmt.Errorf("collective: host groups: the call check's connections: %w", err)
		}
	}()
	for r := range m.ring {
		if r != rank {
			m.ring[r] = make([]hostRecord, meshRing)
		}
	}
	if m.ln, err = net.Listen("tcp", ":0"); err != nil {
		return nil, backend.Wrap(backend.CodeUnavailable, err, "listening")
	}
	mine := meshCard{Token: make([]byte, tokenSize)}
	_, _ = rand.Read(mine.Token) // never fails (crypto/rand)
	if mine.Addrs, err = meshAddrs(m.ln.Addr().(*net.TCPAddr).Port); err != nil {
		return nil, err
	}
	n, err := st.Add(ctx, "intranode/interhost/check-mesh/rank-"+strconv.Itoa(rank), 1)
	if err != nil {
		return nil, err
	}
	ex, err := store.NewExchange(st, "intranode/interhost/check-mesh/"+strconv.FormatInt(n, 10), rank, world)
	if err != nil {
		return nil, err
	}
	defer func() { _ = ex.Close(ctx) }()
	b, _ := json.Marshal(mine)
	raw, err := ex.AllGather(ctx, b)
	if err != nil {
		return nil, err
	}
	m.cards = make([]meshCard, world)
	for r, b := range raw {
		if err := json.Unmarshal(b, &m.cards[r]); err != nil || len(m.cards[r].Token) != tokenSize || len(m.cards[r].Addrs) == 0 {
			return nil, backend.Errorf(backend.CodeInvalidArgument, "rank %d published a malformed card %q", r, b)
		}
	}
	if world == 1 {
		close(m.joined)
	}
	deadline, _ := ctx.Deadline()
	m.wg.Go(func() { m.accept(deadline) })
	errs := make([]error, world)
	var dials sync.WaitGroup
	for r := range world {
		if r != rank {
			dials.Go(func() { m.out[r], errs[r] = m.dial(ctx, r) })
		}
	}
	dials.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	select {
	case <-m.joined:
	case <-ctx.Done():
		m.mu.Lock()
		var missing []int
		for r, c := range m.in {
			if c == nil && r != rank {
				missing = append(missing, r)
			}
		}
		m.mu.Unlock()
		return nil, backend.Wrap(backend.CodeTimeout, ctx.Err(), fmt.Sprintf("ranks %v did not connect", missing))
	}
	// Every peer is in: nobody else may connect.
	_ = m.ln.Close()
	m.outq, m.writing = make(chan hostRecord, meshRing), make(chan struct{})
	go m.write(timeout)
	return m, nil
}

// meshAddrs lists this machine's addresses at port for peers to dial:
// every interface's, loopback last. (A peer on another host reaches one
// of the others; a rank of a simulated host on this machine reaches any.)
func meshAddrs(port int) ([]string, error) {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, backend.Wrap(backend.CodeUnavailable, err, "listing the interfaces' addresses")
	}
	var out, loop []string
	for _, a := range ifs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() || ipn.IP.IsMulticast() {
			continue
		}
		hp := net.JoinHostPort(ipn.IP.String(), strconv.Itoa(port))
		if ipn.IP.IsLoopback() {
			loop = append(loop, hp)
		} else {
			out = append(out, hp)
		}
	}
	if out = append(out, loop...); len(out) == 0 {
		return nil, backend.Errorf(backend.CodeUnavailable, "no interface address to listen on")
	}
	return out, nil
}

// hello is what the dialer from sends to peer to: to's token proves it
// was published to the job, from's its identity.
func (m *checkMesh) hello(to, from int) []byte {
	b := append([]byte(meshMagic), m.cards[to].Token...)
	b = binary.LittleEndian.AppendUint32(b, uint32(from))
	return append(b, m.cards[from].Token...)
}

// accept admits peers until the listener closes.
func (m *checkMesh) accept(deadline time.Time) {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			return
		}
		m.wg.Go(func() { m.admit(c, deadline) })
	}
}

// admit reads a hello on c; a peer that proves itself is answered, and
// its records are read until its connection ends. Anything else is closed.
func (m *checkMesh) admit(c net.Conn, deadline time.Time) {
	b := make([]byte, helloSize)
	_ = c.SetDeadline(deadline)
	if _, err := io.ReadFull(c, b); err != nil {
		_ = c.Close()
		return
	}
	from := int(binary.LittleEndian.Uint32(b[len(meshMagic)+tokenSize:]))
	if from < 0 || from >= len(m.cards) || from == m.rank || !bytes.Equal(b, m.hello(m.rank, from)) {
		_ = c.Close()
		return
	}
	m.mu.Lock()
	if m.closed || m.in[from] != nil {
		m.mu.Unlock()
		_ = c.Close()
		return
	}
	m.in[from] = c
	if m.waiting--; m.waiting == 0 {
		close(m.joined)
	}
	m.mu.Unlock()
	if _, err := c.Write([]byte{helloOK}); err != nil {
		m.lose(from, err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	m.read(from, c)
}

// dial connects to peer r: every address it published at once, keeping
// the first connection whose listener answers the hello.
func (m *checkMesh) dial(ctx context.Context, r int) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	addrs := m.cards[r].Addrs
	type result struct {
		c   net.Conn
		err error
	}
	results := make(chan result, len(addrs))
	for _, a := range addrs {
		go func() {
			c, err := m.reach(ctx, a, r)
			results <- result{c, err}
		}()
	}
	var got net.Conn
	var errs []error
	for range addrs {
		res := <-results
		switch {
		case res.err != nil:
			errs = append(errs, res.err)
		case got == nil:
			got = res.c
			cancel()
		default:
			_ = res.c.Close()
		}
	}
	if got == nil {
		return nil, backend.Wrap(backend.CodeUnavailable, errors.Join(errs...), fmt.Sprintf("reaching rank %d", r))
	}
	return got, nil
}

// reach dials addr and says hello to peer r.
func (m *checkMesh) reach(ctx context.Context, addr string, r int) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	ack := []byte{0}
	if _, err = c.Write(m.hello(r, m.rank)); err == nil {
		_, err = io.ReadFull(c, ack)
	}
	if err == nil && ack[0] != helloOK {
		err = fmt.Errorf("%s answered %q", addr, ack)
	}
	if err != nil || !stop() || c.SetDeadline(time.Time{}) != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%s: %w", addr, errors.Join(err, ctx.Err()))
	}
	return c, nil
}

// read keeps rank from's records as they arrive, until its connection ends.
func (m *checkMesh) read(from int, c net.Conn) {
	rd := bufio.NewReaderSize(c, 64*hostRecordSize)
	b := make([]byte, hostRecordSize)
	for {
		if _, err := io.ReadFull(rd, b); err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("its connection closed")
			}
			m.lose(from, err)
			return
		}
		rec := decodeHostRecord(b)
		m.mu.Lock()
		m.ring[from][rec.seq%meshRing] = rec
		m.notify()
		m.mu.Unlock()
	}
}

// notify wakes the judges waiting for records; caller holds m.mu.
func (m *checkMesh) notify() {
	close(m.arrived)
	m.arrived = make(chan struct{})
}

// lose records why rank r's records stopped arriving.
func (m *checkMesh) lose(r int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone[r] == nil {
		m.gone[r] = err
		m.notify()
	}
}

// send queues rec for every peer: at once, unless the writer is behind by
// meshRing records (a peer that stopped reading holds it up to timeout a
// write), then bounded by ctx's deadline, else by timeout; a record that
// cannot be queued by then is dropped, and the peers miss it. Caller
// holds interHost.mu.
func (m *checkMesh) send(ctx context.Context, rec hostRecord, timeout time.Duration) {
	select {
	case m.outq <- rec:
		return
	default:
	}
	ctx, cancel := withDefaultTimeout(ctx, timeout)
	defer cancel()
	select {
	case m.outq <- rec:
	case <-ctx.Done():
	}
}

// write sends the queued records to every peer until outq closes: all
// that are queued, up to 64, in one write per peer, each write bounded by
// timeout. A peer that cannot be written to is dropped: it has gone, and
// its own records stop too.
func (m *checkMesh) write(timeout time.Duration) {
	defer close(m.writing)
	buf := make([]byte, 0, 64*hostRecordSize)
	add := func(rec hostRecord) {
		buf = buf[:len(buf)+hostRecordSize]
		rec.encode(buf[len(buf)-hostRecordSize:])
	}
	for rec := range m.outq {
		buf = buf[:0]
		add(rec)
	more:
		for len(buf) < cap(buf) {
			select {
			case rec, ok := <-m.outq:
				if !ok {
					break more
				}
				add(rec)
			default:
				break more
			}
		}
		for r, c := range m.out {
			if c == nil {
				continue
			}
			_ = c.SetWriteDeadline(time.Now().Add(timeout))
			if _, err := c.Write(buf); err != nil {
				_ = c.Close()
				m.out[r] = nil
			}
		}
	}
}

// judge waits for every peer's record of this rank's call mine and
// compares them with it (verdict); a peer whose records stopped before
// that one arrived failed; one whose record of mine was since overwritten
// by a later call's is not judged. ranks are the job's ranks, 0 to
// world-1 (verdict's members). ctx bounds the wait.
func (m *checkMesh) judge(ctx context.Context, mine hostRecord, ranks []int, hosts []string) error {
	recs := make([]hostRecord, len(m.ring))
	why := make([]string, len(m.ring))
	for {
		m.mu.Lock()
		var missing []int
		for r, ring := range m.ring {
			if r == m.rank {
				recs[r] = mine
				continue
			}
			got := ring[mine.seq%meshRing]
			switch {
			case got.seq == mine.seq:
				recs[r] = got
			case got.seq != 0 && int32(got.seq-mine.seq) > 0: // overwritten: not judged
				recs[r] = mine
			case m.gone[r] != nil:
				why[r] = fmt.Sprintf("its records stopped before its call %d: %v", mine.seq, m.gone[r])
			default:
				missing = append(missing, r)
			}
		}
		arrived := m.arrived
		m.mu.Unlock()
		if len(missing) == 0 {
			return verdict(m.rank, mine, ranks, recs, why, hosts)
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return backend.Wrap(backend.CodeTimeout, ctx.Err(),
				fmt.Sprintf("collective: host groups: ranks %v sent no record of call %d", missing, mine.seq))
		}
	}
}

// Close sends what is queued, ends every connection and waits for the
// writer and the readers. Caller holds interHost.mu, or owns m alone.
func (m *checkMesh) Close() error {
	if m.outq != nil {
		close(m.outq)
		<-m.writing
		m.outq = nil
	}
	m.mu.Lock()
	m.closed = true
	conns := append([]net.Conn(nil), m.in...)
	m.mu.Unlock()
	var errs []error
	if m.ln != nil {
		if err := m.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, c := range append(conns, m.out...) {
		if c != nil {
			_ = c.Close()
		}
	}
	m.wg.Wait()
	return errors.Join(errs...)
}
