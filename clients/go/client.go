package sowdb

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	pb "github.com/sowdb/sowdb/clients/go/sowdbpb/sowdb/v1"
)

// Defaults shared with the Python and Node SDKs.
const (
	// DefaultAddress is where a client connects when given "".
	DefaultAddress = "127.0.0.1:9007"
	// DefaultBatchSize is the records per response of a query when Query.BatchSize is 0.
	DefaultBatchSize = 10
	// DefaultPublishBatch is the documents per atomic publish request.
	DefaultPublishBatch = 100
	// DefaultMaxMessageBytes is the largest gRPC message either way, as the server's.
	DefaultMaxMessageBytes = 16 * 1024 * 1024
	// DefaultFailoverTimeout is how long a call of a cluster's client looks for a node.
	DefaultFailoverTimeout = 30 * time.Second
	// DefaultKeepalive is the HTTP/2 PING interval on connections with open calls: grpc-go's
	// shortest (it raises any shorter interval to 10 s), where the other SDKs ping every 5 s.
	DefaultKeepalive = 10 * time.Second
)

// ReadFrom says where a cluster's client sends reads (queries, subscriptions, ListTopics).
type ReadFrom int

const (
	// ReadPrimary sends reads to the primary (the default).
	ReadPrimary ReadFrom = iota
	// ReadAny sends reads to any node, replicas included, a different first one each time.
	ReadAny
)

type settings struct {
	token            string
	tls              *tls.Config
	maxMessageBytes  int
	failoverTimeout  time.Duration
	readFrom         ReadFrom
	keepalive        time.Duration
	keepaliveTimeout time.Duration
}

// Option configures a Client (NewClient).
type Option func(*settings)

// WithToken sends "authorization: Bearer TOKEN" on every call (docs/security.md).
func WithToken(token string) Option { return func(s *settings) { s.token = token } }

// WithTLS makes the connections TLS with this configuration (RootCAs for a private CA,
// Certificates for mTLS, ServerName); without it they are plaintext.
func WithTLS(cfg *tls.Config) Option { return func(s *settings) { s.tls = cfg } }

// WithMaxMessageBytes sets the largest gRPC message either way (default 16 MiB, as the server).
func WithMaxMessageBytes(n int) Option { return func(s *settings) { s.maxMessageBytes = n } }

// WithFailoverTimeout sets how long a call of a cluster's client looks for a node that serves
// it after a failover (default 30 s) before it fails with the last error.
func WithFailoverTimeout(d time.Duration) Option { return func(s *settings) { s.failoverTimeout = d } }

// WithReadFrom sets where a cluster's client sends reads (ReadPrimary by default).
func WithReadFrom(r ReadFrom) Option { return func(s *settings) { s.readFrom = r } }

// WithKeepalive sets the HTTP/2 PING interval on connections with open calls (default and
// least 10 s, grpc-go's floor; 0: none) and how long one may go unanswered (0: the interval), so
// that a server cut off by the network fails the calls, or moves them to another node, instead
// of hanging them.
func WithKeepalive(interval, timeout time.Duration) Option {
	return func(s *settings) { s.keepalive, s.keepaliveTimeout = interval, timeout }
}

// Client is a client of one sowd, or of the servers of a cluster. It holds one HTTP/2
// connection per server, opened on first use and shared by all its calls; it is safe for
// concurrent use. Close it when done.
type Client struct {
	nodes     *nodes
	settings  settings
	producers *producers
}

// NewClient makes a client of address: "host:port" ("" is DefaultAddress), or the servers of a
// cluster separated by commas ("h1:9007,h2:9007,h3:9007", rule HA-5). Nothing is dialled yet.
func NewClient(address string, opts ...Option) (*Client, error) {
	s := settings{maxMessageBytes: DefaultMaxMessageBytes, failoverTimeout: DefaultFailoverTimeout, keepalive: DefaultKeepalive}
	for _, o := range opts {
		o(&s)
	}
	if s.keepalive > 0 && s.keepalive < DefaultKeepalive {
		s.keepalive = DefaultKeepalive // what grpc-go would do, with a warning in its log
	}
	if s.keepaliveTimeout <= 0 {
		s.keepaliveTimeout = s.keepalive
	}
	if address == "" {
		address = DefaultAddress
	}
	var addrs []string
	for _, a := range strings.Split(address, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("sowdb: no server address in %q", address)
	}
	n, err := newNodes(addrs, s.dialOptions())
	if err != nil {
		return nil, err
	}
	return &Client{nodes: n, settings: s, producers: newProducers()}, nil
}

// Close ends the client's connections (calls still open fail with Canceled).
func (c *Client) Close() error { return c.nodes.close() }

func (s settings) dialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if s.tls != nil {
		creds = credentials.NewTLS(s.tls)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(s.maxMessageBytes), grpc.MaxCallSendMsgSize(s.maxMessageBytes)),
	}
	if s.keepalive > 0 {
		opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: s.keepalive, Timeout: s.keepaliveTimeout}))
	}
	if s.token != "" {
		// an interceptor rather than PerRPCCredentials, which gRPC refuses on plaintext channels:
		// a token over plaintext is the operator's choice (a sidecar terminating TLS)
		bearer := "Bearer " + s.token
		opts = append(opts,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
				return invoker(metadata.AppendToOutgoingContext(ctx, "authorization", bearer), method, req, reply, cc, o...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(metadata.AppendToOutgoingContext(ctx, "authorization", bearer), desc, cc, method, o...)
			}))
	}
	return opts
}

// DeleteResult is what SowDelete reports.
type DeleteResult struct {
	// DeletedCount is how many records were deleted.
	DeletedCount uint64
	// Bookmark is that of the last delete (0: nothing was deleted).
	Bookmark uint64
}

// Delete says which records SowDelete deletes: exactly one of Filter, SowKeys or Data.
type Delete struct {
	Filter  string
	SowKeys []string
	// Data is a JSON document: the record with its SowKey is deleted.
	Data []byte
}

// SowDelete deletes records of a SOW topic (on the primary of a cluster).
func (c *Client) SowDelete(ctx context.Context, topic string, d Delete) (DeleteResult, error) {
	if d.SowKeys != nil && len(d.SowKeys) == 0 {
		return DeleteResult{}, &Error{Code: codes.InvalidArgument, Message: "sow_keys is empty: name at least one", Metadata: map[string]string{}}
	}
	req := &pb.SowDeleteRequest{Topic: topic, Filter: d.Filter, SowKeys: d.SowKeys, Data: d.Data}
	resp, err := onPrimary(ctx, c, "sow_delete on "+topic, true, func(ch *channel) (*pb.SowDeleteResponse, error) {
		return ch.sow.SowDelete(ctx, req)
	})
	if err != nil {
		return DeleteResult{}, err
	}
	return DeleteResult{DeletedCount: resp.GetDeletedCount(), Bookmark: resp.GetBookmark()}, nil
}

// ListTopics lists the configured topics with their record counts.
func (c *Client) ListTopics(ctx context.Context) ([]*pb.TopicInfo, error) {
	resp, err := onReader(ctx, c, "list_topics", func(ch *channel) (*pb.ListTopicsResponse, error) {
		return ch.sow.ListTopics(ctx, &pb.ListTopicsRequest{})
	})
	return resp.GetTopics(), err
}

// ClusterStatus lists the nodes of the cluster as the primary (or the node asked) sees them
// (HA-6; an admin's call when security is on).
func (c *Client) ClusterStatus(ctx context.Context) ([]*pb.ClusterNode, error) {
	resp, err := onReader(ctx, c, "cluster_status", func(ch *channel) (*pb.ClusterStatusResponse, error) {
		return ch.admin.ClusterStatus(ctx, &pb.ClusterStatusRequest{})
	})
	return resp.GetNodes(), err
}

// Replace is the new filter and options of a live subscription (ReplaceSubscription, R-1).
type Replace struct {
	Filter  string
	Options SubscribeOptions
	// OrderBy, TopN and SkipN are the page (given again for a paginated subscription).
	OrderBy     string
	TopN, SkipN int
	// BatchSize is the records per response of the re-run query.
	BatchSize int
}

// ReplaceSubscription changes the filter and options of a live subscription of this client
// and returns the bookmark at which the change took effect.
func (c *Client) ReplaceSubscription(ctx context.Context, subID string, r Replace) (uint64, error) {
	req := &pb.ReplaceSubscriptionRequest{
		SubId: subID, Filter: r.Filter, Options: r.Options.toPb(), OrderBy: r.OrderBy,
		TopN: optional(r.TopN), SkipN: optional(r.SkipN), BatchSize: optional(r.BatchSize),
	}
	// a subscription lives on one node's connection: ask the node it runs on
	ch := c.nodes.subscriptionNode(subID)
	resp, err := ch.sow.ReplaceSubscription(ctx, req)
	if err != nil {
		return 0, toError(ctx, err)
	}
	return resp.GetBookmark(), nil
}

func optional(n int) *uint32 {
	if n <= 0 {
		return nil
	}
	v := uint32(n)
	return &v
}
