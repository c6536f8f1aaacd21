// Package testbin builds the binaries that end-to-end and chaos tests run as real
// processes: workq itself and nats-server, both from this module and its go.mod
// dependencies, so the tests need nothing but Go.
package testbin

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// Build builds workq and nats-server into dir and returns their paths.
func Build(dir string) (workq, natsServer string, err error) {
	workq, natsServer = filepath.Join(dir, "workq"), filepath.Join(dir, "nats-server")
	for _, b := range [][]string{{workq, "github.com/workq/workq/cmd/workq"}, {natsServer, "github.com/nats-io/nats-server/v2"}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	return workq, natsServer, nil
}
