package sowdb

import (
	pb "github.com/sowdb/sowdb/clients/go/sowdbpb/sowdb/v1"
)

// Event is one event of a SowAndSubscribe or Subscribe stream: one of the *...Event types of
// this file. A type switch takes it apart; Kind names it as the other SDKs do ("group_begin").
//
//	switch e := ev.(type) {
//	case *sowdb.GroupEndEvent: ...
//	case *sowdb.PublishEvent:  for _, r := range e.Records { ... }
//	case *sowdb.OofEvent:      fmt.Println(e.Record.SowKey, e.Reason)
//	}
type Event interface {
	// Kind is "subscribed", "group_begin", "sow", "group_end", "publish", "oof", "deleted",
	// "completed" or "heartbeat".
	Kind() string
}

// SubscribedEvent comes first: the subscription is placed, with its id (for
// ReplaceSubscription) and sequence point.
type SubscribedEvent struct {
	SubID    string
	Bookmark uint64
}

// GroupBeginEvent opens the query results; Bookmark is the point the query sees.
type GroupBeginEvent struct {
	QueryID  string
	Bookmark uint64
}

// SowEvent is a batch of query results.
type SowEvent struct{ Records []Record }

// GroupEndEvent closes the query results, with the counts.
type GroupEndEvent struct {
	QueryID                                         string
	RecordsReturned, RecordsMatched, RecordsScanned uint64
}

// PublishEvent is live (or replayed) records.
type PublishEvent struct{ Records []Record }

// OofReason is why a record left the result set (O-1).
type OofReason string

// The reasons of an OofEvent.
const (
	OofDeleted     OofReason = "deleted"
	OofExpired     OofReason = "expired"
	OofMatch       OofReason = "match"
	OofUnspecified OofReason = "unspecified"
)

// OofEvent says a record left the result set (O-1). Record is, for OofMatch, the update that
// moved it out, otherwise its last stored state.
type OofEvent struct {
	Reason OofReason
	Record Record
}

// DeletedEvent is records deleted (a Subscribe without Oof).
type DeletedEvent struct{ Records []Record }

// CompletedEvent says the replay of a bookmark subscription is done; live events follow.
type CompletedEvent struct{ Bookmark uint64 }

// HeartbeatEvent is idle progress: the latest bookmark of the instance.
type HeartbeatEvent struct{ Bookmark uint64 }

func (*SubscribedEvent) Kind() string { return "subscribed" }
func (*GroupBeginEvent) Kind() string { return "group_begin" }
func (*SowEvent) Kind() string        { return "sow" }
func (*GroupEndEvent) Kind() string   { return "group_end" }
func (*PublishEvent) Kind() string    { return "publish" }
func (*OofEvent) Kind() string        { return "oof" }
func (*DeletedEvent) Kind() string    { return "deleted" }
func (*CompletedEvent) Kind() string  { return "completed" }
func (*HeartbeatEvent) Kind() string  { return "heartbeat" }

// records is the records an event carries (an oof's one), for code that treats them alike.
func records(ev Event) []Record {
	switch e := ev.(type) {
	case *SowEvent:
		return e.Records
	case *PublishEvent:
		return e.Records
	case *DeletedEvent:
		return e.Records
	case *OofEvent:
		return []Record{e.Record}
	}
	return nil
}

var reasons = map[pb.OofReason]OofReason{
	pb.OofReason_OOF_REASON_DELETED: OofDeleted,
	pb.OofReason_OOF_REASON_EXPIRED: OofExpired,
	pb.OofReason_OOF_REASON_MATCH:   OofMatch,
}

// streamResponse is what both subscription streams send (their oneofs share field numbers).
type streamResponse interface {
	GetSubscribed() *pb.Subscribed
	GetPublish() *pb.RecordBatch
	GetOof() *pb.Oof
	GetCompleted() *pb.Completed
	GetHeartbeat() *pb.Heartbeat
}

// eventFromPb is the SDK event of a stream response (nil for a kind this SDK does not know).
func eventFromPb(resp streamResponse) Event {
	if r, ok := resp.(*pb.SowAndSubscribeResponse); ok {
		switch e := r.GetEvent().(type) {
		case *pb.SowAndSubscribeResponse_GroupBegin:
			return &GroupBeginEvent{QueryID: e.GroupBegin.GetQueryId(), Bookmark: e.GroupBegin.GetBookmark()}
		case *pb.SowAndSubscribeResponse_Records:
			return &SowEvent{Records: recordsFromPb(e.Records.GetRecords())}
		case *pb.SowAndSubscribeResponse_GroupEnd:
			g := e.GroupEnd
			return &GroupEndEvent{QueryID: g.GetQueryId(), RecordsReturned: g.GetRecordsReturned(), RecordsMatched: g.GetRecordsMatched(), RecordsScanned: g.GetRecordsScanned()}
		}
	}
	if r, ok := resp.(*pb.SubscribeResponse); ok && r.GetDeleted() != nil {
		return &DeletedEvent{Records: recordsFromPb(r.GetDeleted().GetRecords())}
	}
	switch {
	case resp.GetPublish() != nil:
		return &PublishEvent{Records: recordsFromPb(resp.GetPublish().GetRecords())}
	case resp.GetOof() != nil:
		reason, ok := reasons[resp.GetOof().GetReason()]
		if !ok {
			reason = OofUnspecified
		}
		return &OofEvent{Reason: reason, Record: recordFromPb(resp.GetOof().GetRecord())}
	case resp.GetSubscribed() != nil:
		return &SubscribedEvent{SubID: resp.GetSubscribed().GetSubId(), Bookmark: resp.GetSubscribed().GetBookmark()}
	case resp.GetCompleted() != nil:
		return &CompletedEvent{Bookmark: resp.GetCompleted().GetBookmark()}
	case resp.GetHeartbeat() != nil:
		return &HeartbeatEvent{Bookmark: resp.GetHeartbeat().GetBookmark()}
	}
	return nil
}
