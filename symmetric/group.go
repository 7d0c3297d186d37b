package symmetric

import (
	"fmt"
	"sync"

	"github.com/intranode/intranode/symmetric/store"
)

// GroupInfo is what a process knows about a group it belongs to: its rank,
// the group's size and the store the ranks rendezvous through.
type GroupInfo struct {
	Rank  int
	World int
	Store store.Store
}

type groupKey struct {
	name string
	rank int
}

// The group registry maps group names to their info, as the reference's
// set_group_info does. It is keyed by name and rank because several ranks of
// one group may live in one process (goroutines as ranks, as the tests and
// the fake backend do).
var (
	groupsMu sync.RWMutex
	groups   = map[groupKey]GroupInfo{}
)

// SetGroupInfo declares this process's membership of a group as the given
// rank. Declaring the same name and rank twice with different values is an
// error; repeating identical values is not.
func SetGroupInfo(name string, rank, world int, st store.Store) error {
	if name == "" {
		return fmt.Errorf("symmetric: empty group name")
	}
	if world < 1 || rank < 0 || rank >= world {
		return fmt.Errorf("symmetric: group %q: rank %d out of range for world %d", name, rank, world)
	}
	if st == nil {
		return fmt.Errorf("symmetric: group %q: nil store", name)
	}
	groupsMu.Lock()
	defer groupsMu.Unlock()
	k := groupKey{name, rank}
	if old, ok := groups[k]; ok {
		if old.World == world && old.Store == st {
			return nil
		}
		return fmt.Errorf("symmetric: group %q rank %d already declared with world %d", name, rank, old.World)
	}
	groups[k] = GroupInfo{Rank: rank, World: world, Store: st}
	return nil
}

// LookupGroup returns what SetGroupInfo recorded for a group and rank.
func LookupGroup(name string, rank int) (GroupInfo, bool) {
	groupsMu.RLock()
	defer groupsMu.RUnlock()
	g, ok := groups[groupKey{name, rank}]
	return g, ok
}

// ForgetGroup removes a rank's membership from the registry, for programs
// that create many short-lived groups.
func ForgetGroup(name string, rank int) {
	groupsMu.Lock()
	defer groupsMu.Unlock()
	delete(groups, groupKey{name, rank})
}
