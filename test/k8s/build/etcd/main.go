// Command etcd is the released etcd server (go.etcd.io/etcd/server/v3)
// behind the smallest main: the end-to-end test's control plane needs the
// etcd binary and the etcd module has no main package of its own to install.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
