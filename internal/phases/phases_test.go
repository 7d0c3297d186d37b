package phases

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTimerNamesStepsInOrder(t *testing.T) {
	tm := Start()
	tm.Mark("open")
	tm.Mark("exchange")
	attrs := tm.Attrs()
	require.Len(t, attrs, 4)
	require.Equal(t, "phases", attrs[0])
	steps := strings.Fields(attrs[1].(string))
	require.Len(t, steps, 2)
	require.True(t, strings.HasPrefix(steps[0], "open="), steps[0])
	require.True(t, strings.HasPrefix(steps[1], "exchange="), steps[1])
	require.Equal(t, "total", attrs[2])
}
