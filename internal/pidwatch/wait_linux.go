package pidwatch

import (
	"encoding/binary"
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// pollInterval is how often the watch looks at done between the peers'
// pidfds where it has no eventfd to be woken by: the delay of stop, not
// of noticing an exit.
const pollInterval = 100

// wait blocks until a peer exits before finished says it had finished
// (true, that peer) or done is closed. A peer whose pidfd cannot be opened
// because it no longer exists has exited; one whose pidfd cannot be opened
// otherwise (an old kernel, no permission) is not watched. done's closing
// is written to an eventfd that the poll watches beside the pidfds, so
// that stop returns at once: a rendezvous ends with stop, and a poll that
// only timed out now and then held every rendezvous up to pollInterval.
func wait(done <-chan struct{}, peers []Peer, finished func(rank int) bool) (Peer, bool) {
	early := func(p Peer) bool { return finished == nil || !finished(p.Rank) }
	var fds []unix.PollFd
	var who []Peer
	defer func() {
		for _, f := range fds {
			_ = unix.Close(int(f.Fd))
		}
	}()
	for _, p := range peers {
		fd, err := unix.PidfdOpen(p.PID, 0)
		if errors.Is(err, unix.ESRCH) {
			if early(p) {
				return p, true
			}
			continue
		}
		if err != nil {
			continue
		}
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		who = append(who, p)
	}
	// The eventfd, when there is one, is the last of fds; who holds the
	// peers of the others.
	timeout := pollInterval
	if len(who) > 0 {
		if efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err == nil {
			fds = append(fds, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
			timeout = -1
			quit := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				select {
				case <-done:
					_, _ = unix.Write(efd, binary.NativeEndian.AppendUint64(nil, 1))
				case <-quit:
				}
			})
			// The writer returns before the deferred close of fds above
			// closes the eventfd, so it never writes to a descriptor
			// number reused since.
			defer func() {
				close(quit)
				wg.Wait()
			}()
		}
	}
	for {
		select {
		case <-done:
			return Peer{}, false
		default:
		}
		if len(who) == 0 {
			<-done
			return Peer{}, false
		}
		n, err := unix.Poll(fds, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			<-done
			return Peer{}, false
		}
		if n > 0 {
			for i := 0; i < len(who); i++ {
				if fds[i].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) == 0 {
					continue
				}
				if early(who[i]) {
					return who[i], true
				}
				// It had finished: watch the others only.
				_ = unix.Close(int(fds[i].Fd))
				fds = append(fds[:i], fds[i+1:]...)
				who = append(who[:i], who[i+1:]...)
				i--
			}
		}
	}
}
