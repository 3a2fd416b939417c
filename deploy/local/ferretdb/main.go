// Command ferretdb-run starts FerretDB v1 (PostgreSQL backend) through its embeddable package.
//
// The upstream cmd/ferretdb binary panics when built from the module proxy because its
// build/version/version.txt is git-ignored and missing from the module zip; the embeddable
// package skips that check, so this wrapper is what the local stack builds and runs.
//
// The PostgreSQL backend pushes every top-level scalar equality down to SQL, where an expression
// index can serve it; the SQLite backend read whole collections in Go for a guarded update.
package main

import (
	"context"
	"flag"
	"log"
	"os/signal"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	addr := flag.String("listen-addr", "127.0.0.1:27017", "TCP address to listen on")
	url := flag.String("postgresql-url", "postgres://127.0.0.1:5432/ferretdb", "PostgreSQL connection URL (a UTF8 database with a C or C.UTF-8 locale)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:      ferretdb.ListenerConfig{TCP: *addr},
		Handler:       "postgresql",
		PostgreSQLURL: *url,
	})
	if err != nil {
		log.Fatalf("ferretdb: %v", err)
	}
	log.Printf("ferretdb listening on %s", *addr)
	if err := f.Run(ctx); err != nil && ctx.Err() == nil {
		log.Fatalf("ferretdb: %v", err)
	}
}
