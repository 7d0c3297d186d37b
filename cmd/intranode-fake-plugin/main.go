// Command intranode-fake-plugin serves the fake backend as an out-of-process
// backend plugin: the reference a vendor's plugin is measured against, and
// the proof that the plugin path passes the conformance suite.
//
//	make plugins
//	intranode conformance --backend plugin:./bin/intranode-fake-plugin --world 2
//
// It is started by a host, never by hand. The fake is configured as the
// registered "fake" driver is: INTRANODE_FAKE_DEVICES,
// INTRANODE_FAKE_TOPOLOGY and INTRANODE_FAKE_BROKEN_P2P from the
// environment the host passes on, then an optional argument of key=value
// settings (devices=2,topology=ring), which a Go host gives with
// plugin.WithArgs.
package main

import (
	"fmt"
	"os"

	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/backend/plugin"

	// The fake's kernels are Go functions registered from init: they must
	// be registered in the process that runs them, which is this one.
	_ "github.com/intranode/intranode/kernels/cpu"
)

func main() {
	arg := ""
	if len(os.Args) > 1 {
		arg = os.Args[1]
	}
	// Nothing may reach stdout before Serve: go-plugin's handshake is the
	// first line there. Failures go to stderr, which the host quotes.
	opts, err := fake.EnvOptions(arg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "intranode-fake-plugin:", err)
		os.Exit(1)
	}
	b, err := fake.New(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "intranode-fake-plugin:", err)
		os.Exit(1)
	}
	plugin.Serve(b)
}
