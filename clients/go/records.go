package sowdb

import (
	"encoding/json"
	"time"

	pb "github.com/sowdb/sowdb/clients/go/sowdbpb/sowdb/v1"
)

// Record is one stored or published record: its document is Data, the JSON text as the server
// sent it, which Decode parses into a value of the caller's type (or Doc into a map).
type Record struct {
	// Topic is the record's topic (useful with regex topics).
	Topic string
	// SowKey is the record's identity within its topic (K-1); opaque.
	SowKey string
	// Bookmark is the journal sequence number of the change that made this version.
	Bookmark uint64
	// Timestamp is when the server applied that change.
	Timestamp time.Time
	// Data is the JSON document (for delta subscriptions: the key and changed fields only).
	Data json.RawMessage
}

// Decode parses the document into v (a pointer), as json.Unmarshal does.
func (r *Record) Decode(v any) error { return json.Unmarshal(r.Data, v) }

// Doc is the document as a map (numbers as float64, as encoding/json gives them).
func (r *Record) Doc() (map[string]any, error) {
	var m map[string]any
	err := json.Unmarshal(r.Data, &m)
	return m, err
}

func recordFromPb(r *pb.Record) Record {
	if r == nil {
		return Record{}
	}
	out := Record{Topic: r.GetTopic(), SowKey: r.GetSowKey(), Bookmark: r.GetBookmark(), Data: r.GetData()}
	if ts := r.GetTimestamp(); ts != nil {
		out.Timestamp = ts.AsTime()
	}
	return out
}

func recordsFromPb(rs []*pb.Record) []Record {
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = recordFromPb(r)
	}
	return out
}
