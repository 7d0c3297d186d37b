package cpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend/fake"
	"github.com/intranode/intranode/kernels"
)

func TestRegisteredWithFake(t *testing.T) {
	require.Contains(t, fake.Modules(), kernels.ModuleName)
}
