package main

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// held is what a rank process holds by name: each open descriptor's target
// (its number and what /proc/self/fd says it refers to) and each
// goroutine's innermost function with the function that started it. The
// soak keeps it beside the counts before a rank opens anything and after
// it has closed everything, so that a leak is reported as what leaked.
type held struct {
	FDs        map[int]string `json:"fds,omitempty"`
	Goroutines []string       `json:"goroutines,omitempty"`
}

func readHeld() held {
	h := held{FDs: map[int]string{}}
	var socks map[string]string
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			n, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			t, err := os.Readlink("/proc/self/fd/" + e.Name())
			if err != nil {
				continue
			}
			if inode, ok := strings.CutPrefix(t, "socket:["); ok {
				if socks == nil {
					socks = socketKinds()
				}
				if k, ok := socks[strings.TrimSuffix(inode, "]")]; ok {
					t += " " + k
				}
			}
			h.FDs[n] = t
		}
	}
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	h.Goroutines = goroutineNames(string(buf))
	return h
}

// tcpStates names /proc/net/tcp's state column.
var tcpStates = map[string]string{"01": "established", "02": "syn-sent", "03": "syn-recv", "04": "fin-wait1",
	"05": "fin-wait2", "06": "time-wait", "07": "close", "08": "close-wait", "09": "last-ack", "0A": "listen", "0B": "closing"}

// socketKinds describes this process's sockets by inode, from
// /proc/self/net: "(unix /path)" or "(unix)", "(tcp listen)",
// "(tcp6 established)", "(udp)".
func socketKinds() map[string]string {
	out := map[string]string{}
	if b, err := os.ReadFile("/proc/self/net/unix"); err == nil {
		for _, l := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(l)
			if len(f) < 7 {
				continue
			}
			k := "(unix)"
			if len(f) > 7 {
				k = "(unix " + f[7] + ")"
			}
			out[f[6]] = k
		}
	}
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6"} {
		b, err := os.ReadFile("/proc/self/net/" + proto)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(l)
			if len(f) < 10 {
				continue
			}
			k := "(" + proto + ")"
			if st, ok := tcpStates[f[3]]; ok && strings.HasPrefix(proto, "tcp") {
				k = "(" + proto + " " + st + ")"
			}
			out[f[9]] = k
		}
	}
	return out
}

// goroutineNames names each goroutine of a runtime.Stack dump by its
// innermost function and the function that created it.
func goroutineNames(dump string) []string {
	var out []string
	for _, block := range strings.Split(dump, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[0], "goroutine ") {
			continue
		}
		name := funcName(lines[1])
		for _, l := range lines[2:] {
			if c, ok := strings.CutPrefix(l, "created by "); ok {
				name += " (from " + funcName(c) + ")"
				break
			}
		}
		out = append(out, name)
	}
	return out
}

// funcName is a stack line's function without its arguments or the
// module's path.
func funcName(line string) string {
	if i := strings.LastIndex(line, "("); i > 0 {
		line = line[:i]
	}
	if i := strings.Index(line, " in goroutine"); i > 0 {
		line = line[:i]
	}
	return strings.TrimPrefix(strings.TrimSpace(line), "github.com/intranode/intranode/")
}

// kindNumber is the inode or number in a descriptor target such as
// "socket:[1234]" or "anon_inode:[eventfd]"'s bracket when it is numeric,
// and a run of hex or digits at the end of a file name.
var kindNumber = regexp.MustCompile(`:\[[0-9]+\]|[-_.][0-9a-fA-F]{6,}\b|[0-9]+$`)

// gained lists, counted by kind, the descriptors and goroutines in after
// that were not in before: "3× socket, 2× /dev/nvidia-uvm" for
// descriptors (a target's inode or trailing number dropped, so that
// alike ones add up), "2× runtime.gopark (from …)" for goroutines. A
// descriptor counts as gained when its number is new or now refers to
// something else.
func gained(before, after held) (fds, goroutines string) {
	var fd []string
	for n, t := range after.FDs {
		if before.FDs[n] != t {
			fd = append(fd, kindNumber.ReplaceAllString(t, "*"))
		}
	}
	left := map[string]int{}
	for _, g := range before.Goroutines {
		left[g]++
	}
	var gs []string
	for _, g := range after.Goroutines {
		if left[g] > 0 {
			left[g]--
			continue
		}
		gs = append(gs, g)
	}
	return countKinds(fd), countKinds(gs)
}

// growth says how b's counts and names grew over a's: "descriptors 6 -> 8
// [2× pipe*], goroutines 3 -> 3 []".
func growth(a, b point) string {
	fds, gs := gained(a.Held, b.Held)
	return fmt.Sprintf("descriptors %d -> %d [%s], goroutines %d -> %d [%s]", a.FDs, b.FDs, fds, a.Goroutines, b.Goroutines, gs)
}

// countKinds writes each distinct item with its count, most first.
func countKinds(items []string) string {
	n := map[string]int{}
	for _, it := range items {
		n[it]++
	}
	kinds := make([]string, 0, len(n))
	for k := range n {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if n[a] != n[b] {
			return n[b] - n[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d× %s", n[k], k)
	}
	return strings.Join(parts, ", ")
}
