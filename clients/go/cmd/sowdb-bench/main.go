// Command sowdb-bench measures the Go SDK against a running sowd, for tools/bench/bench_sdks.py,
// which runs each SDK's benchmark program the same way and compares them:
//
//	sowdb-bench --address HOST:PORT --mode sow|publish --count N [--topic orders]
//
// sow queries the topic and receives every record parsed into a map[string]any (encoding/json),
// as an application would use it; publish publishes N orders {"orderId": i, "symbol":
// "SYM<i%100>", "price": ..., "qty": ...} in atomic requests of 100 over one stream. It prints
// one JSON line: {"sdk": "go", "mode": ..., "count": N, "seconds": S}; count is what it received
// (sow) or what the server acknowledged (publish), so a short run shows.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"iter"
	"os"
	"time"

	sowdb "github.com/sowdb/sowdb/clients/go"
)

type result struct {
	SDK     string  `json:"sdk"`
	Mode    string  `json:"mode"`
	Count   int     `json:"count"`
	Seconds float64 `json:"seconds"`
}

type order struct {
	OrderID int     `json:"orderId"`
	Symbol  string  `json:"symbol"`
	Price   float64 `json:"price"`
	Qty     int     `json:"qty"`
}

func main() {
	address := flag.String("address", sowdb.DefaultAddress, "the sowd, HOST:PORT")
	mode := flag.String("mode", "sow", "sow or publish")
	count := flag.Int("count", 1_000_000, "orders to publish; for sow, the records expected (a shortfall is an error)")
	topic := flag.String("topic", "orders", "the topic")
	batch := flag.Int("batch", 100, "records per sow response, documents per publish request")
	flag.Parse()

	client, err := sowdb.NewClient(*address)
	if err != nil {
		fail(err)
	}
	defer client.Close()
	ctx := context.Background()
	var n int
	start := time.Now()
	switch *mode {
	case "sow":
		for rec, err := range client.Sow(ctx, *topic, sowdb.Query{BatchSize: *batch}) {
			if err != nil {
				fail(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(rec.Data, &doc); err != nil {
				fail(err)
			}
			n++
		}
		if n < *count {
			fail(fmt.Errorf("the query returned %d records, fewer than --count %d", n, *count))
		}
	case "publish":
		ack, err := client.PublishSeq(ctx, *topic, orders(*count), &sowdb.PublishOptions{BatchSize: *batch})
		if err != nil {
			fail(err)
		}
		n = ack.Count
	default:
		fail(fmt.Errorf("--mode is sow or publish, not %q", *mode))
	}
	seconds := time.Since(start).Seconds()
	line, _ := json.Marshal(result{SDK: "go", Mode: *mode, Count: n, Seconds: seconds})
	fmt.Println(string(line))
}

// orders yields the benchmark's documents one at a time: a publish of a million holds one
// request's worth, not the million.
func orders(n int) iter.Seq[any] {
	return func(yield func(any) bool) {
		for i := range n {
			if !yield(order{OrderID: i, Symbol: fmt.Sprintf("SYM%d", i%100), Price: 100 + float64(i%1000)/10, Qty: 1 + i%500}) {
				return
			}
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sowdb-bench:", err)
	os.Exit(1)
}
