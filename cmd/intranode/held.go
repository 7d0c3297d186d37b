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
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			n, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if t, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
				h.FDs[n] = t
			}
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
var kindNumber = regexp.MustCompile(`:\[[0-9]+\]$|[-_.][0-9a-fA-F]{6,}$|[0-9]+$`)

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
