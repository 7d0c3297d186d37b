package kernels

import (
	"fmt"
	"os"
)

// LoadImage returns the kernel image a GPU backend should load: the file
// named by the environment variable env when that is set (passed through
// decode, when not nil: the HIP image may be gzip'd), embedded() otherwise.
// A file that cannot be read or is empty is an error naming env (pkg
// prefixes the message); a missing one matches os.ErrNotExist.
func LoadImage(pkg, env string, embedded func() []byte, decode func([]byte) ([]byte, error)) ([]byte, error) {
	path := os.Getenv(env)
	if path == "" {
		return embedded(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", pkg, env, err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: %s: %s is empty", pkg, env, path)
	}
	if decode != nil {
		if b, err = decode(b); err != nil {
			return nil, fmt.Errorf("%s: %s: %s: %w", pkg, env, path, err)
		}
	}
	return b, nil
}
