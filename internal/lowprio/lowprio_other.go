//go:build !linux

package lowprio

// lower does nothing: the work runs at the normal priority.
func lower(int) {}
