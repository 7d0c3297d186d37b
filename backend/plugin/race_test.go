//go:build linux && race

package plugin_test

// raceEnabled makes the test plugin binary a race build too, so that it
// reuses the packages the test binary was compiled with.
const raceEnabled = true
