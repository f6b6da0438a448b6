// The etcd server binary: go.etcd.io/etcd/server/v3 has no main package of its own (the
// release's etcd binary is built from the repository root module), so this is that main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
