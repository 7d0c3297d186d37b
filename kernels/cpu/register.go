package cpu

import (
	"context"

	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/kernels"
)

// Importing this package makes kernels.ModuleName loadable on the fake
// backend.
func init() {
	ks := Kernels()
	adapted := make(map[string]fake.Kernel, len(ks))
	for name, k := range ks {
		adapted[name] = func(ctx context.Context, l *fake.Launch) error {
			return k(ctx, l.Mem, l.Config, l.Args)
		}
	}
	fake.RegisterModule(kernels.ModuleName, adapted)
}
