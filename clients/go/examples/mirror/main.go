// A live mirror of the SYM1 orders: docs/go.md shows this file, and the tests run it.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	sowdb "github.com/sowdb/sowdb/clients/go"
)

type Order struct {
	OrderID int     `json:"orderId"`
	Price   float64 `json:"price"`
}

func main() {
	client, err := sowdb.NewClient(cmp.Or(os.Getenv("SOWDB_ADDRESS"), "127.0.0.1:9007")) // sowdb.WithToken, sowdb.WithTLS
	if err != nil {
		panic(err)
	}
	defer client.Close()
	seconds, _ := strconv.Atoi(cmp.Or(os.Getenv("SOWDB_SECONDS"), "10"))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Duration(seconds)*time.Second, cancel) // ends in 10 s (a cancel ends the loop quietly)
	mirror := sowdb.NewMirror()                                // keyed by (topic, SowKey)

	query := sowdb.Query{Filter: "/symbol = 'SYM1'"}
	for event, err := range client.SowAndSubscribe(ctx, "orders", query, sowdb.SubscribeOptions{Oof: true}) {
		if err != nil { // an *sowdb.Error: code, field, reason, column
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		mirror.Apply(event)        // query results, publishes, oof and deletes
		switch e := event.(type) { // one type per event kind, each with its own fields
		case *sowdb.GroupEndEvent:
			fmt.Printf("%d orders of SYM1\n", mirror.Len())
		case *sowdb.PublishEvent:
			for _, r := range e.Records {
				var o Order
				_ = r.Decode(&o)
				fmt.Printf("order %d at %g\n", o.OrderID, o.Price)
			}
		case *sowdb.OofEvent:
			fmt.Printf("order %s left (%s); %d now\n", e.Record.SowKey, e.Reason, mirror.Len())
		}
	}
}
