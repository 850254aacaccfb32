package sowdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/sowdb/sowdb/clients/go/sowdbpb/sowdb/v1"
)

// Publish: documents in atomic requests of PublishOptions.BatchSize (each also under the
// client's gRPC message limit) over one bidi stream, and, in a cluster (SPEC §13, HA-5), the
// same stream opened again on the primary found after a failover, sending again every request
// that was not answered. A request sent again may already have been applied (the old primary
// wrote it, a replica holds it, the answer was lost with the connection): each request therefore
// carries a J-4 producer id and a sequence number fixed when it is made, and the server answers
// one whose sequence it has applied as a duplicate without applying it again.

// Message is a document with per-message settings; Publish also takes plain values.
type Message struct {
	// Data is the document: a value encoding/json encodes, or JSON text ([]byte,
	// json.RawMessage or string).
	Data any
	// SowKey is required by topics without key fields, refused by the others.
	SowKey string
	// Expiration is the record's time to live (0: the topic's default).
	Expiration time.Duration
}

// PublishOptions are the options of one Publish call.
type PublishOptions struct {
	// Delta merges each document into the stored record instead of replacing it (D-1).
	Delta bool
	// BatchSize is the documents per atomic request (default DefaultPublishBatch); a request is
	// cut short where the next document would take it over the client's message limit.
	BatchSize int
	// ProducerID names the J-4 producer (a client of a cluster generates one otherwise).
	ProducerID string
}

// PublishAck is what a Publish stored.
type PublishAck struct {
	// Count is the documents stored (or acknowledged as duplicates after a failover).
	Count int
	// FirstBookmark and LastBookmark are those of the first and last message stored (0: none).
	FirstBookmark, LastBookmark uint64
}

// Publish publishes docs to topic in atomic requests over one stream and returns once every
// request is acknowledged. Each document is a Message, JSON text ([]byte, json.RawMessage,
// string) or any value encoding/json encodes. A refusal is a *PublishError (errors.As): nothing
// of the refused request, nor after it, is stored.
func (c *Client) Publish(ctx context.Context, topic string, docs []any, opts *PublishOptions) (PublishAck, error) {
	return c.PublishSeq(ctx, topic, slices.Values(docs), opts)
}

// PublishSeq is Publish of the documents an iterator yields, made into requests as they are
// needed (a publish of a million generated documents holds one request's worth at a time).
func (c *Client) PublishSeq(ctx context.Context, topic string, docs iter.Seq[any], opts *PublishOptions) (PublishAck, error) {
	o := PublishOptions{}
	if opts != nil {
		o = *opts
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultPublishBatch
	}
	if o.BatchSize < 0 {
		return PublishAck{}, fmt.Errorf("sowdb: BatchSize must be at least 1, not %d", o.BatchSize)
	}
	var prod *producer
	if c.nodes.cluster() || o.ProducerID != "" {
		var release func()
		prod, release = c.producers.acquire(o.ProducerID)
		defer release()
	}
	next, stop := iter.Pull(docs)
	defer stop()
	f := &feed{next: next, topic: topic, delta: o.Delta, batch: o.BatchSize, prod: prod,
		room: c.settings.maxMessageBytes - requestHeadroom - len(topic) - len(o.ProducerID) - 64}
	return c.publish(ctx, f)
}

// requestHeadroom is the bytes of a request's limit kept for what is not a message.
const requestHeadroom = 4096

// feed is the requests of one publish: made from the documents as they are needed, kept until
// answered, so that a stream opened again after a failover sends the unanswered ones again, in
// order, then goes on with the documents. Only one sender goroutine uses it at a time.
type feed struct {
	next     func() (any, bool)
	topic    string
	delta    bool
	batch    int
	room     int
	prod     *producer
	pending  *pb.PublishMessage // did not fit its request: the first of the next one
	done     bool
	inputErr error

	mu       sync.Mutex
	sent     []sentRequest // from index base on
	base     int           // requests answered before sent[0]
	stopping bool          // a refusal came: send nothing more
}

type sentRequest struct {
	req  *pb.PublishRequest
	size int
}

// at is request i of the call, made when it is the next one; false when there is none.
func (f *feed) at(i int) (*pb.PublishRequest, bool) {
	f.mu.Lock()
	if f.stopping {
		f.mu.Unlock()
		return nil, false
	}
	if i-f.base < len(f.sent) {
		r := f.sent[i-f.base].req
		f.mu.Unlock()
		return r, true
	}
	f.mu.Unlock()
	req, size := f.make(i)
	if req == nil {
		return nil, false
	}
	f.mu.Lock()
	f.sent = append(f.sent, sentRequest{req, size})
	f.mu.Unlock()
	return req, true
}

func (f *feed) make(index int) (*pb.PublishRequest, int) {
	if f.done && f.pending == nil {
		return nil, 0
	}
	var msgs []*pb.PublishMessage
	used := 0
	for len(msgs) < f.batch {
		m := f.pending
		f.pending = nil
		if m == nil {
			if f.done {
				break
			}
			doc, ok := f.next()
			if !ok {
				f.done = true
				break
			}
			var err error
			if m, err = publishMessage(doc); err != nil {
				f.inputErr, f.done = err, true
				return nil, 0
			}
		}
		size := len(m.Data) + len(m.SowKey) + 32
		if len(msgs) > 0 && used+size > f.room {
			f.pending = m // a message over the limit alone goes alone (refused by its size)
			break
		}
		msgs = append(msgs, m)
		used += size
	}
	if len(msgs) == 0 {
		return nil, 0
	}
	req := &pb.PublishRequest{Topic: f.topic, Messages: msgs, Delta: f.delta, CorrelationId: strconv.Itoa(index), StopOnError: true}
	if f.prod != nil {
		req.ProducerId, req.ProducerSeq = f.prod.id, f.prod.nextSeq()
	}
	return req, len(msgs)
}

// answer takes the oldest unanswered request off the feed and returns its size.
func (f *feed) answer() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sent) == 0 {
		return 0
	}
	size := f.sent[0].size
	f.sent[0] = sentRequest{}
	f.sent = f.sent[1:]
	f.base++
	return size
}

func (f *feed) answered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.base
}

func (f *feed) stop() {
	f.mu.Lock()
	f.stopping = true
	f.mu.Unlock()
}

func publishMessage(doc any) (*pb.PublishMessage, error) {
	m := &pb.PublishMessage{}
	if msg, ok := doc.(Message); ok {
		m.SowKey = msg.SowKey
		if msg.Expiration > 0 {
			m.Expiration = durationpb.New(msg.Expiration)
		}
		doc = msg.Data
	} else if msg, ok := doc.(*Message); ok {
		return publishMessage(*msg)
	}
	switch d := doc.(type) {
	case []byte:
		m.Data = d
	case json.RawMessage:
		m.Data = d
	case string:
		m.Data = []byte(d)
	default:
		b, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("sowdb: encoding a document: %w", err)
		}
		m.Data = b
	}
	return m, nil
}

func (c *Client) publish(ctx context.Context, f *feed) (PublishAck, error) {
	var ack PublishAck
	var refused *pb.PublishResponse
	refusedBatch, refusedOffset := 0, 0
	deadline := time.Now().Add(c.settings.failoverTimeout) // of the current failover: from the last answer
	for {
		ch, err := c.nodes.findPrimary(ctx, deadline, true)
		if err != nil {
			return ack, err
		}
		err = func() error {
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := ch.sow.Publish(sctx)
			if err != nil {
				return err
			}
			senderDone := make(chan struct{})
			defer func() { cancel(); <-senderDone }()
			go func() {
				defer close(senderDone)
				for i := f.answered(); ; i++ {
					req, ok := f.at(i)
					if !ok {
						_ = stream.CloseSend()
						return
					}
					if stream.Send(req) != nil {
						return // Recv reports why
					}
				}
			}()
			for {
				resp, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if refused != nil {
					continue
				}
				if resp.GetError() != nil {
					e := FromStatus(resp.GetError())
					if c.nodes.cluster() && isFailover(e) {
						return e // not applied here: sent again on the primary
					}
					refused, refusedBatch, refusedOffset = resp, f.answered(), ack.Count
					f.stop()
					continue
				}
				size := f.answer()
				deadline = time.Now().Add(c.settings.failoverTimeout)
				ack.Count += size
				if !resp.GetDuplicate() {
					if ack.FirstBookmark == 0 {
						ack.FirstBookmark = resp.GetFirstBookmark()
					}
					ack.LastBookmark = resp.GetLastBookmark()
				}
			}
		}()
		if err == nil {
			break
		}
		e := asError(ctx, err)
		if !c.nodes.cluster() || ctx.Err() != nil || f.inputErr != nil || !isFailover(e) {
			return ack, e
		}
		failedOn(c.nodes, ch, e)
		if time.Now().After(deadline) {
			return ack, gaveUp("publish to "+f.topic, c.settings.failoverTimeout, e)
		}
		if err := pause(ctx, retryPause); err != nil {
			return ack, err
		}
	}
	if refused != nil {
		base := FromStatus(refused.GetError())
		pe := &PublishError{Err: base, BatchIndex: refusedBatch, MessageIndex: -1, Stored: ack.Count, FirstBookmark: ack.FirstBookmark, LastBookmark: ack.LastBookmark}
		if i, err := strconv.Atoi(base.Metadata["message_index"]); err == nil {
			pe.MessageIndex = refusedOffset + i
		}
		return ack, pe
	}
	if f.inputErr != nil {
		return ack, f.inputErr
	}
	return ack, nil
}

// producer is one J-4 producer while a publish holds it: its id and its last sequence number.
type producer struct {
	id   string
	last uint64
}

// nextSeq is the time in microseconds, or the last one plus one when that is not above it:
// sequences keep rising across restarts of a process that names the same producer id (the
// server keeps its last sequence forever and would answer a restarted count as duplicates).
func (p *producer) nextSeq() uint64 {
	now := uint64(time.Now().UnixMicro())
	if now > p.last {
		p.last = now
	} else {
		p.last++
	}
	return p.last
}

// producers are the J-4 producers of one client. A producer applies its requests in sequence
// order, so two publishes never share one at the same time: a generated producer is lent to one
// publish at a time (and reused after, so the server's table grows by a few per client, not one
// per call); publishes naming the same ProducerID run one after the other.
type producers struct {
	base  string
	mu    sync.Mutex
	idle  []*producer
	made  int
	named map[string]*namedProducer
}

type namedProducer struct {
	p    *producer
	turn chan struct{} // holds one token: the right to publish as p
}

func newProducers() *producers {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return &producers{base: hex.EncodeToString(b[:]), named: map[string]*namedProducer{}}
}

func (ps *producers) acquire(id string) (*producer, func()) {
	ps.mu.Lock()
	if id == "" {
		var p *producer
		if n := len(ps.idle); n > 0 {
			p, ps.idle = ps.idle[n-1], ps.idle[:n-1]
		} else {
			p = &producer{id: fmt.Sprintf("%s-%d", ps.base, ps.made)}
			ps.made++
		}
		ps.mu.Unlock()
		return p, func() { ps.mu.Lock(); ps.idle = append(ps.idle, p); ps.mu.Unlock() }
	}
	np, ok := ps.named[id]
	if !ok {
		np = &namedProducer{p: &producer{id: id}, turn: make(chan struct{}, 1)}
		np.turn <- struct{}{}
		ps.named[id] = np
	}
	ps.mu.Unlock()
	<-np.turn
	return np.p, func() { np.turn <- struct{}{} }
}
