// SPDX-License-Identifier: Apache-2.0
// The etcd server as a test peer of the Kubernetes lane (tests/k8s): etcd's own main,
// built from the module proxy at the version go.mod pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
