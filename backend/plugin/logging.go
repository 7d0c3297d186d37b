//go:build linux

package plugin

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// newHCLogger gives go-plugin a logger that writes into log: at debug level
// when log is enabled there, otherwise errors only, so that go-plugin stays
// quiet by default.
func newHCLogger(log *slog.Logger) hclog.Logger {
	level := hclog.Error
	if log.Enabled(context.Background(), slog.LevelDebug) {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:            "go-plugin",
		Level:           level,
		Output:          slogWriter{log},
		DisableTime:     true,
		IncludeLocation: false,
	})
}

// slogWriter logs each write (one hclog line) at warning level.
type slogWriter struct{ log *slog.Logger }

// Write logs p.
func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Warn(strings.TrimSpace(string(p)))
	return len(p), nil
}

// tailKeep is how much of a plugin's stderr is kept for error messages.
const tailKeep = 4 << 10

// tail receives the plugin process's stderr: it logs each chunk at debug
// level and keeps the end, which errors quote when the plugin dies (a Go
// panic's message, say).
type tail struct {
	log  *slog.Logger
	path string

	mu  sync.Mutex
	buf []byte
}

func newTail(log *slog.Logger, path string) *tail { return &tail{log: log, path: path} }

// Write keeps the last tailKeep bytes of p and what came before.
func (t *tail) Write(p []byte) (int, error) {
	t.log.Debug("plugin stderr", "plugin", t.path, "text", strings.TrimRight(string(p), "\n"))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailKeep {
		t.buf = append(t.buf[:0:0], t.buf[len(t.buf)-tailKeep:]...)
	}
	return len(p), nil
}

// excerpt is the kept stderr for an error message ("" when there is none).
func (t *tail) excerpt() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	text := string(bytes.TrimSpace(t.buf))
	t.mu.Unlock()
	if text == "" {
		return ""
	}
	lines := strings.Split(text, "\n")
	if len(lines) > 12 {
		lines = lines[len(lines)-12:]
	}
	return fmt.Sprintf(" (its stderr ends: %q)", strings.Join(lines, "\n"))
}
