// Package pidwatch ends a context when a peer process of this host exits,
// so that a rank waiting for a peer that has died (in a store exchange, on
// a socket) fails at once, naming it, instead of at its deadline.
//
// Peers are watched through pidfds (pidfd_open, Linux 5.3 and later),
// which become readable when the process exits, also while it is a zombie
// its parent has not reaped; a peer is only watched when it shares this
// process's PID namespace, where its number names it. Elsewhere, or where
// pidfds are missing, Watch watches nothing and the deadline still holds.
package pidwatch
