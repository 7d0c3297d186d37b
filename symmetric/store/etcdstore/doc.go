// Package etcdstore is a store.Store kept in etcd v3, for jobs whose ranks
// span several hosts and meet through a distributed store they already run.
//
// One job uses one key prefix: rank keys live under "<prefix>/k/", and
// each client registers itself as a member under "<prefix>/m/<name>".
// Every client (one per rank) holds its own lease, kept alive in the
// background and attached to every key it writes, its member key included.
// A rank that dies stops renewing its lease; etcd then deletes its keys
// within the lease TTL, and the others see it go (Members, WaitGone, or a
// Check of its keys). Close stops renewing without revoking, so peers
// still reading the last values a rank wrote have one TTL to do so; a key
// therefore lives as long as the client that wrote it last, plus one TTL.
//
// Get and Wait read first and, if a key is missing, watch it from the
// revision of that read, so no Set between the read and the watch is
// missed. Add and CompareAndSet are etcd transactions conditioned on the
// key's modification revision or value, so concurrent writers never lose
// an update.
//
// Importing the package registers the etcd:// URL scheme with store.Open:
//
//	etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/PREFIX[?PARAMS]
//
// with parameters ttl (a Go duration, lease TTL), member (this client's
// member name), tls=1 (TLS with the system's roots), cacert, cert and key
// (PEM files; any of them implies TLS). A user without a password in the
// URL takes it from $INTRANODE_ETCD_PASSWORD, which keeps it out of
// command lines. Programs that do not import this package do not link
// etcd.
//
// Values are limited by etcd's request size (1.5 MiB by default, the
// server's --max-request-bytes); larger Sets fail with an error matching
// backend.ErrInvalidArgument.
package etcdstore
