package sowdb

import (
	"encoding/json"
	"maps"
)

// Mirror is a local copy of a query's result set, kept in step by the events of a
// SowAndSubscribe (or Subscribe) stream: Apply stores query results and publishes, and removes
// records that leave (oof) or are deleted. Records are keyed by (topic, SowKey). Not safe for
// concurrent use: apply events from the goroutine that reads the stream.
type Mirror struct {
	// Delta merges delta publishes into the record held (D-1) instead of replacing it; set it
	// when the subscription has SubscribeOptions.Delta.
	Delta bool
	// Ready is true once the query's results are all in (group_end).
	Ready bool
	// Bookmark is the highest bookmark applied.
	Bookmark uint64

	topics map[string]map[string]Record
	size   int
}

// NewMirror makes an empty mirror.
func NewMirror() *Mirror { return &Mirror{topics: map[string]map[string]Record{}} }

// Apply applies one event; events without records (subscribed, heartbeat, ...) change nothing
// but Ready.
func (m *Mirror) Apply(ev Event) {
	if m.topics == nil {
		m.topics = map[string]map[string]Record{}
	}
	switch e := ev.(type) {
	case *GroupEndEvent:
		m.Ready = true
	case *SowEvent:
		for _, r := range e.Records {
			m.put(r)
		}
	case *PublishEvent:
		for _, r := range e.Records {
			if m.Delta {
				if held, ok := m.Get(r.Topic, r.SowKey); ok {
					r.Data = merge(held.Data, r.Data)
				}
			}
			m.put(r)
		}
	case *OofEvent:
		m.remove(e.Record)
	case *DeletedEvent:
		for _, r := range e.Records {
			m.remove(r)
		}
	}
}

func (m *Mirror) put(r Record) {
	t := m.topics[r.Topic]
	if t == nil {
		t = map[string]Record{}
		m.topics[r.Topic] = t
	}
	if _, ok := t[r.SowKey]; !ok {
		m.size++
	}
	t[r.SowKey] = r
	m.Bookmark = max(m.Bookmark, r.Bookmark)
}

func (m *Mirror) remove(r Record) {
	if t := m.topics[r.Topic]; t != nil {
		if _, ok := t[r.SowKey]; ok {
			delete(t, r.SowKey)
			m.size--
		}
	}
	m.Bookmark = max(m.Bookmark, r.Bookmark)
}

// Len is the number of records held.
func (m *Mirror) Len() int { return m.size }

// Get is the record of (topic, sowKey).
func (m *Mirror) Get(topic, sowKey string) (Record, bool) {
	r, ok := m.topics[topic][sowKey]
	return r, ok
}

// Topic is the records of one topic by SowKey (a copy).
func (m *Mirror) Topic(name string) map[string]Record { return maps.Clone(m.topics[name]) }

// Records is every record held, topic by topic, in no order.
func (m *Mirror) Records() []Record {
	out := make([]Record, 0, m.size)
	for _, t := range m.topics {
		for _, r := range t {
			out = append(out, r)
		}
	}
	return out
}

// merge is a delta's fields over the held document's (D-1: objects merge field by field).
func merge(held, delta json.RawMessage) json.RawMessage {
	var a, b map[string]any
	if json.Unmarshal(held, &a) != nil || json.Unmarshal(delta, &b) != nil {
		return delta
	}
	mergeInto(a, b)
	out, err := json.Marshal(a)
	if err != nil {
		return delta
	}
	return out
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sub, ok := v.(map[string]any); ok {
			if have, ok := dst[k].(map[string]any); ok {
				mergeInto(have, sub)
				continue
			}
		}
		dst[k] = v
	}
}
