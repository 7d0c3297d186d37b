// Package ipc passes file descriptors — shareable device allocations, memfds —
// between the processes of one group on one host. It is the descriptor
// exchange under symmetric memory: every rank exports its allocation as a
// descriptor, and AllGatherFD hands each rank a descriptor for every peer's
// allocation, which it then maps.
//
// Each process opens one Channel per group with Listen. The channel is a
// Unix datagram socket bound to "@intranode-<nonce>-<pid>" in the Linux
// abstract namespace; SendFD addresses a peer by its pid alone, because the
// nonce is common to the group. Descriptors travel as SCM_RIGHTS control
// messages together with a small tag, so a receiver can tell which round or
// purpose a descriptor belongs to and messages can arrive in any order.
//
// # Why datagrams
//
// A datagram socket is connectionless: one socket sends to every peer and
// receives from all of them, with no accept loop, no per-peer connection
// state and no ordering constraint on which rank connects first. Unix
// datagrams are reliable and keep message boundaries, as SOCK_SEQPACKET
// does; when a receiver's queue is full the sender is told to wait rather
// than losing the message. SOCK_SEQPACKET would add one thing: the sender
// could read the receiver's credentials after connecting. The nonce gives
// the sender its assurance instead (see below).
//
// # Why the abstract namespace
//
// Abstract names vanish when the socket closes, so a crashed process leaves
// no socket file behind to be cleaned up or to block the next run, and no
// directory has to be agreed on or be writable. Abstract sockets are scoped
// to the network namespace: all ranks of a group must share one, and one pid
// namespace, since peers are named by pid.
//
// # What the nonce protects against
//
// Pids are predictable. Were sockets named from the pid alone, any local
// process could bind the name a rank is about to use — denying it the name,
// or, worse, receiving the descriptors its peers send there, which grant
// access to their device memory. The group draws a fresh 128-bit nonce
// (NewNonce) and shares it through its store, so only processes that can
// read the store know where the group's sockets will be. It also keeps two
// groups in one process, or two runs, from colliding. A name that is already
// bound makes Listen fail with an error matching backend.ErrUnavailable.
//
// # Why credentials are checked
//
// Abstract sockets have no file permissions: any process in the network
// namespace that learns a name can send to it. The receiver therefore
// enables SO_PASSCRED and checks the kernel-supplied credentials of every
// message: the sender must run as the same user as this process and be one
// of the pids given to SetPeers. A message that fails the check, carries no
// credentials, has malformed control data or payload, or carries anything but
// exactly one descriptor is dropped, every descriptor it carried is closed at
// once, and the reason is logged at debug level; it never reaches a caller.
// The kernel vouches for the credentials, so an unprivileged process cannot
// forge them; a privileged one (CAP_SYS_ADMIN, CAP_SETUID) can, and is
// outside this package's threat model.
//
// Received descriptors are close-on-exec. Descriptors that have arrived but
// were not claimed with RecvFD are closed by Close. Every blocking call
// takes a context and fails with an error matching backend.ErrTimeout when
// it ends (or after the channel's default timeout when it has no deadline);
// Close makes blocked calls fail with backend.ErrClosed.
package ipc
