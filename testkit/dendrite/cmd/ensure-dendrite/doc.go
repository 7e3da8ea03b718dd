// Command ensure-dendrite builds the test homeserver into Lisa's cache (if
// it is not there yet) and prints its path. CI runs it before the tests so
// no test pays for the build; tests would build it themselves otherwise.
package main
