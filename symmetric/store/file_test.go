//go:build unix

package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/symmetric/store"
)

// The cross-process test re-executes this test binary; these variables tell
// the child which part to play.
const (
	helperEnv      = "INTRANODE_STORE_HELPER"
	helperDirEnv   = "INTRANODE_STORE_HELPER_DIR"
	helperRankEnv  = "INTRANODE_STORE_HELPER_RANK"
	helperWorldEnv = "INTRANODE_STORE_HELPER_WORLD"
)

const helperAdds = 20

// TestHelperProcess is not a test: it is the child process of
// TestFileAcrossProcesses, and returns at once in a normal run.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "file" {
		return
	}
	if err := fileHelper(); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func fileHelper() error {
	rank, err := strconv.Atoi(os.Getenv(helperRankEnv))
	if err != nil {
		return err
	}
	world, err := strconv.Atoi(os.Getenv(helperWorldEnv))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := store.NewFile(os.Getenv(helperDirEnv))
	if err != nil {
		return err
	}
	defer f.Close()

	// Wait for the parent, proving a Get in one process sees a Set in
	// another.
	start, err := f.Get(ctx, "start")
	if err != nil {
		return err
	}
	for range helperAdds {
		if _, err := f.Add(ctx, "count", 1); err != nil {
			return err
		}
	}
	ex, err := store.NewExchange(f, "xproc", rank, world)
	if err != nil {
		return err
	}
	for round := range 5 {
		all, err := ex.AllGather(ctx, fmt.Appendf(nil, "%s/%d/%d", start, round, rank))
		if err != nil {
			return err
		}
		for r, v := range all {
			if want := fmt.Sprintf("%s/%d/%d", start, round, r); string(v) != want {
				return fmt.Errorf("round %d: rank %d sent %q, want %q", round, r, v, want)
			}
		}
	}
	if err := ex.Close(ctx); err != nil {
		return err
	}
	return f.Set(ctx, fmt.Sprintf("ok/%d", rank), []byte("ok"))
}

func TestFileAcrossProcesses(t *testing.T) {
	const world = 3
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	children := make([]*exec.Cmd, world)
	stderr := make([]*bytes.Buffer, world)
	for rank := range world {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			helperEnv+"=file",
			helperDirEnv+"="+dir,
			helperRankEnv+"="+strconv.Itoa(rank),
			helperWorldEnv+"="+strconv.Itoa(world),
		)
		stderr[rank] = new(bytes.Buffer)
		cmd.Stderr = stderr[rank]
		require.NoError(t, cmd.Start())
		children[rank] = cmd
	}
	f, err := store.NewFile(dir)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Set(ctx, "start", []byte("go")))
	for rank, cmd := range children {
		require.NoError(t, cmd.Wait(), "child %d: %s", rank, stderr[rank])
	}
	keys := make([]string, world)
	for r := range keys {
		keys[r] = fmt.Sprintf("ok/%d", r)
	}
	ok, err := f.Check(ctx, keys...)
	require.NoError(t, err)
	require.True(t, ok)
	n, err := f.Add(ctx, "count", 0)
	require.NoError(t, err)
	require.Equal(t, int64(world*helperAdds), n, "adds from several processes sum exactly")

	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range names {
		require.False(t, strings.HasPrefix(e.Name(), ".tmp"), "temporary file %s left behind", e.Name())
	}
	// What is left: the lock, start, count and the ok keys; the exchange
	// cleaned up after itself.
	require.Len(t, names, 1+2+world)
}

func TestFileKeyNames(t *testing.T) {
	dir := t.TempDir()
	f, err := store.NewFile(dir)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, dir, f.Dir())
	ctx := context.Background()
	keys := []string{"short", strings.Repeat("k", 1000), "../escape", "a/b/c"}
	for _, k := range keys {
		require.NoError(t, f.Set(ctx, k, []byte(k)))
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, len(keys)+1, "one file per key plus the lock, all inside dir")
	for _, e := range entries {
		require.True(t, e.Type().IsRegular(), e.Name())
		require.LessOrEqual(t, len(e.Name()), 255)
	}
	for _, k := range keys {
		v, err := f.Get(ctx, k)
		require.NoError(t, err)
		require.Equal(t, k, string(v))
	}
}

func TestNewFileErrors(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	tests := []struct {
		name string
		dir  string
		code error
	}{
		{"empty", "", backend.ErrInvalidArgument},
		{"under a file", filepath.Join(notDir, "sub"), backend.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := store.NewFile(tc.dir)
			require.Error(t, err)
			require.True(t, errors.Is(err, tc.code), "%v", err)
		})
	}
}

// A File store reads no key and opens no lock through a symbolic link
// planted in its directory, and refuses a directory that others may write
// to or that another user owns.
func TestFileRefusesLinksAndUnsafeDirectories(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("key link", func(t *testing.T) {
		dir := t.TempDir()
		secret := filepath.Join(t.TempDir(), "secret")
		require.NoError(t, os.WriteFile(secret, []byte("not yours"), 0o600))
		s := withKeyReplaced(t, ctx, dir, func(p string) error { return os.Symlink(secret, p) })
		v, err := s.Get(ctx, "probe")
		require.ErrorContains(t, err, "symbolic link")
		require.Nil(t, v)
	})
	t.Run("lock link", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(t.TempDir(), "target")
		require.NoError(t, os.Symlink(target, filepath.Join(dir, ".lock")))
		_, err := store.NewFile(dir)
		require.ErrorContains(t, err, "symbolic link")
		_, statErr := os.Lstat(target)
		require.ErrorIs(t, statErr, os.ErrNotExist, "the link's target was created")
	})
	t.Run("key FIFO", func(t *testing.T) {
		s := withKeyReplaced(t, ctx, t.TempDir(), mkfifo)
		_, err := s.Get(ctx, "probe")
		require.ErrorContains(t, err, "not a regular file")
	})
	t.Run("writable by others", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Chmod(dir, 0o777))
		_, err := store.NewFile(dir)
		require.ErrorIs(t, err, store.ErrUnsafeDirectory)
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
		require.ErrorContains(t, err, "may write")
	})
	t.Run("another user's", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to give a directory to another user")
		}
		dir := t.TempDir()
		require.NoError(t, os.Chown(dir, 65534, 65534))
		_, err := store.NewFile(dir)
		require.ErrorIs(t, err, store.ErrUnsafeDirectory)
		require.ErrorContains(t, err, "owned by uid 65534")
	})
}

// withKeyReplaced opens a File store in dir, sets the key "probe", and
// replaces its file with what plant makes at its path.
func withKeyReplaced(t *testing.T, ctx context.Context, dir string, plant func(path string) error) *store.File {
	t.Helper()
	s, err := store.NewFile(dir)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.Set(ctx, "probe", []byte("x")))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "k") {
			p := filepath.Join(dir, e.Name())
			require.NoError(t, os.Remove(p))
			require.NoError(t, plant(p))
		}
	}
	return s
}
