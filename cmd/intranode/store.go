package main

import (
	"flag"
	"fmt"
	"net/url"

	"github.com/intranode/intranode/symmetric/store"
)

// storeFlag registers --store, the rendezvous store URL every rank opens
// with store.Open; without one, the command does what dflt says.
func storeFlag(fs *flag.FlagSet, dflt string) *string {
	return fs.String("store", "", "rendezvous store URL every rank opens: mem://NAME, file:///dir, tcp://host:port,\n"+
		"etcd://host:port/prefix\n(default: "+dflt+")")
}

// checkStoreURL refuses, as a usage error, a --store the ranks could not
// all meet through (see store.CheckSharedURL); procs says whether the
// ranks are processes. An empty URL is the command's default store.
func checkStoreURL(raw string, procs bool) error {
	if raw == "" {
		return nil
	}
	if err := store.CheckSharedURL(raw, procs); err != nil {
		return fmt.Errorf("%w: --store: %w", errUsage, err)
	}
	return nil
}

// redactedURL is raw with any password hidden, for output.
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Redacted()
}
