//go:build !linux

package discovery

import (
	"errors"
	"fmt"
	"os"
)

func runInNetns() int {
	fmt.Fprintln(os.Stderr, "FAIL: the discovery tests run in a private Linux network namespace, to use real multicast on loopback; this is not Linux")
	return 1
}

func setupNetns() error { return errors.New("not linux") }
