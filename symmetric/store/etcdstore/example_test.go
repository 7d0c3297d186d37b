package etcdstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/intranode/intranode/symmetric/store"
	"github.com/intranode/intranode/symmetric/store/etcdstore"
)

// A rank of a multi-host job opens the job's etcd store by URL. Importing
// etcdstore is what makes store.Open understand etcd://.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, "etcd://etcd-0.example:2379,etcd-1.example:2379/intranode/job-42?member=rank3&ttl=10s")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	_ = st.Set(ctx, "hello/rank3", []byte("node-b"))
}

// In code, a Config carries what a URL cannot: a *tls.Config, say.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := etcdstore.New(ctx, etcdstore.Config{
		Endpoints: []string{"https://etcd-0.example:2379"},
		Prefix:    "/intranode/job-42",
		Member:    "rank3",
		TTL:       10 * time.Second,
		Username:  "intranode",
		Password:  "from a secret store",
	}, store.WithTimeout(2*time.Minute))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	// Who is still alive, and wait for a peer to go.
	members, _ := s.Members(ctx)
	fmt.Println(members)
	_ = s.WaitGone(ctx, "rank7")
}
