// A client of a cluster's servers: docs/go.md shows this file, and the cluster test runs it.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	sowdb "github.com/sowdb/sowdb/clients/go"
)

func main() {
	// the servers of a cluster (rule HA-5), separated by commas
	client, err := sowdb.NewClient(cmp.Or(os.Getenv("SOWDB_SERVERS"), "127.0.0.1:9007,127.0.0.1:9008,127.0.0.1:9009"),
		sowdb.WithFailoverTimeout(30*time.Second), // how long a call looks for the primary again after a failover
		sowdb.WithReadFrom(sowdb.ReadPrimary),     // or sowdb.ReadAny: queries and subscriptions on any node
	)
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()

	ack, err := client.Publish(ctx, "orders", []any{map[string]any{"orderId": 7, "symbol": "SYM1", "price": 100}}, nil) // on the primary
	if err != nil {
		panic(err)
	}
	fmt.Printf("stored at bookmark %d\n", ack.LastBookmark)
	nodes, err := client.ClusterStatus(ctx)
	if err != nil {
		panic(err)
	}
	for _, n := range nodes {
		fmt.Printf("%s is %s, applied %d\n", n.GetNode(), n.GetRole(), n.GetAppliedBookmark())
	}
}
