package conformance

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/intranode/intranode/internal/launch"
	"github.com/intranode/intranode/symmetric/store"
)

// Where the ranks of a case meet: a store the harness provides (an
// in-process one for goroutines, a TCP server for processes), the stores
// Config.NewStores gives, or the store Config.StoreURL names, opened by
// every rank itself under a prefix no other case uses.

// check refuses a Config whose ranks could not meet.
func (c *Config) check() error {
	if c.ShareDevice && c.Mode == Processes {
		return errors.New("conformance: Config.ShareDevice needs ranks as goroutines (one process, one context on the device)")
	}
	if c.StoreURL == "" {
		return nil
	}
	if c.NewStores != nil {
		return errors.New("conformance: Config.StoreURL and Config.NewStores exclude each other")
	}
	if err := store.CheckSharedURL(c.StoreURL, c.Mode == Processes); err != nil {
		return fmt.Errorf("conformance: Config.StoreURL: %w", err)
	}
	// Caught here, an unlinked scheme is one error rather than every
	// case failing with it.
	u, err := url.Parse(c.StoreURL)
	if err != nil {
		return fmt.Errorf("conformance: Config.StoreURL: %w", err)
	}
	if known := store.Schemes(); !slices.Contains(known, strings.ToLower(u.Scheme)) {
		return fmt.Errorf("conformance: Config.StoreURL %q: scheme %q is not linked into this program (known: %s)",
			u.Redacted(), u.Scheme, strings.Join(known, ", "))
	}
	return nil
}

// freshPrefix returns a key prefix that no other case, trial or run uses,
// so that a case on a shared store (Config.StoreURL) never reads an
// earlier one's keys: exchanges start their rounds at 0 every time.
func freshPrefix() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("conformance: random store prefix: %w", err)
	}
	return fmt.Sprintf("intranode-conformance/%x/", b), nil
}

// goroutineStores returns the ranks' stores: cfg.NewStores's, every rank's
// own handle of cfg.StoreURL, or one fresh in-process store shared by all.
func goroutineStores(ctx context.Context, cfg Config, world int) ([]store.Store, func(), error) {
	newStores := cfg.NewStores
	if newStores == nil && cfg.StoreURL != "" {
		newStores = urlStores(cfg.StoreURL, cfg.Timeout)
	}
	if newStores != nil {
		stores, release, err := newStores(ctx, world)
		if err == nil && len(stores) != world {
			release()
			err = fmt.Errorf("NewStores gave %d stores for %d ranks", len(stores), world)
		}
		return stores, release, err
	}
	st := store.NewMem(store.WithTimeout(cfg.Timeout))
	stores := make([]store.Store, world)
	for r := range stores {
		stores[r] = st
	}
	return stores, func() { _ = st.Close() }, nil
}

// urlStores is Config.StoreURL as a Config.NewStores: every rank opens the
// URL itself, as a rank of a multi-host job would, and all of one call's
// ranks share a fresh prefix.
func urlStores(rawURL string, timeout time.Duration) func(ctx context.Context, world int) ([]store.Store, func(), error) {
	return func(ctx context.Context, world int) ([]store.Store, func(), error) {
		prefix, err := freshPrefix()
		if err != nil {
			return nil, nil, err
		}
		stores := make([]store.Store, 0, world)
		release := func() {
			for _, s := range stores {
				_ = s.Close()
			}
		}
		for r := range world {
			s, err := store.OpenPrefixed(ctx, rawURL, prefix, store.WithTimeout(timeout))
			if err != nil {
				release()
				return nil, nil, fmt.Errorf("rank %d: opening %s: %w", r, redacted(rawURL), err)
			}
			stores = append(stores, s)
		}
		return stores, release, nil
	}
}

// startRanks starts world child processes (internal/launch) that meet
// through the run's store: a TCP store served for the run (with a fresh
// secret when secure), or Config.StoreURL under a fresh prefix. env gives
// each rank's own variables; the group is killed after timeout plus a
// margin to report, so a hung child cannot hang the suite.
func startRanks(ctx context.Context, cfg Config, world int, secure bool, timeout time.Duration, env func(r int) []string) (*launch.Group, error) {
	lc := launch.Config{World: world, Args: cfg.ChildArgs, Deadline: timeout + 15*time.Second}
	var common []string
	if cfg.StoreURL != "" {
		prefix, err := freshPrefix()
		if err != nil {
			return nil, err
		}
		common = []string{envStore + "=", envStoreURL + "=" + cfg.StoreURL, envStorePrefix + "=" + prefix}
	} else {
		lc.ServeStore = true
		lc.StoreOptions = []store.Option{store.WithTimeout(timeout)}
		common = []string{envStoreURL + "=", envStorePrefix + "="}
		if secure {
			secret, err := store.NewSecret()
			if err != nil {
				return nil, err
			}
			lc.StoreOptions = append(lc.StoreOptions, store.WithSecret([]byte(secret)))
			common = append(common, store.EnvSecret+"="+secret)
		}
	}
	lc.Env = func(r int, addr string) []string {
		e := append(slices.Clone(common), env(r)...)
		if addr != "" {
			e = append(e, envStore+"="+addr)
		}
		return e
	}
	return launch.Start(ctx, lc)
}

// openChildStore opens, in a child process, the store startRanks told it
// of.
func openChildStore(ctx context.Context, timeout time.Duration) (store.Store, error) {
	if raw := os.Getenv(envStoreURL); raw != "" {
		st, err := store.OpenPrefixed(ctx, raw, os.Getenv(envStorePrefix), store.WithTimeout(timeout))
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", redacted(raw), err)
		}
		return st, nil
	}
	st, err := store.DialTCP(ctx, os.Getenv(envStore), store.WithTimeout(timeout))
	if err != nil {
		return nil, err
	}
	return st, nil
}

// redacted is a store URL with any password hidden, for messages.
func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the store URL"
	}
	return u.Redacted()
}
