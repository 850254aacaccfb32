// The tour of clients/go/README.md: that page shows this file, and the tests run it.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	sowdb "github.com/sowdb/sowdb/clients/go"
)

type Order struct {
	OrderID int     `json:"orderId"`
	Symbol  string  `json:"symbol"`
	Price   float64 `json:"price"`
}

func main() {
	client, err := sowdb.NewClient(cmp.Or(os.Getenv("SOWDB_ADDRESS"), "127.0.0.1:9007"))
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a deadline for every call below
	defer cancel()

	ack, err := client.Publish(ctx, "orders", []any{Order{1, "SYM1", 120}, Order{2, "SYM1", 95}}, nil) // batches of 100 over one stream
	if err != nil {
		panic(err)
	}
	fmt.Printf("stored %d, bookmarks %d..%d\n", ack.Count, ack.FirstBookmark, ack.LastBookmark)
	_, err = client.Publish(ctx, "notes", []any{sowdb.Message{Data: map[string]any{"text": "hi"}, SowKey: "n1", Expiration: time.Minute}}, nil)
	if err != nil {
		panic(err)
	}

	for rec, err := range client.Sow(ctx, "orders", sowdb.Query{Filter: "/symbol = 'SYM1'", OrderBy: "/price DESC"}) {
		if err != nil {
			panic(err)
		}
		var o Order
		_ = rec.Decode(&o)
		fmt.Printf("order %d at %g (key %s, bookmark %d)\n", o.OrderID, o.Price, rec.SowKey, rec.Bookmark)
	}

	_, err = client.SowAll(ctx, "orders", sowdb.Query{Filter: "/price >"})
	var e *sowdb.Error
	if errors.As(err, &e) {
		fmt.Println(e.CodeName(), e.Field(), e.Column(), e.Message)
		// INVALID_ARGUMENT filter 9 expected an operand at column 9 (end of input)
	}
}
