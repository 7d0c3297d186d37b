// Package closing releases the resources an object holds in fields: each
// one closed if set and cleared, every error kept.
package closing

import "io"

// Field closes *p unless it is the zero value (nil), sets it to the zero
// value and returns errs with Close's error appended (nil errors too:
// errors.Join drops them). Called on a field already cleared it does
// nothing, so a release that runs twice closes each resource once.
func Field[T interface {
	comparable
	io.Closer
}](errs []error, p *T) []error {
	var zero T
	if *p == zero {
		return errs
	}
	err := (*p).Close()
	*p = zero
	return append(errs, err)
}
