package closing_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/internal/closing"
)

type res struct {
	closes int
	err    error
}

func (r *res) Close() error { r.closes++; return r.err }

func TestField(t *testing.T) {
	boom := errors.New("boom")
	a, b := &res{}, &res{err: boom}
	var none *res
	fields := []*res{a, none, b}
	var errs []error
	for i := range fields {
		errs = closing.Field(errs, &fields[i])
	}
	require.Equal(t, []*res{nil, nil, nil}, fields, "every field cleared")
	require.Equal(t, 1, a.closes)
	require.Equal(t, 1, b.closes)
	require.Len(t, errs, 2, "the unset field adds nothing")
	require.ErrorIs(t, errors.Join(errs...), boom)

	// Again: already cleared, nothing is closed twice.
	for i := range fields {
		errs = closing.Field(errs, &fields[i])
	}
	require.Equal(t, 1, a.closes)
	require.Len(t, errs, 2)
}
