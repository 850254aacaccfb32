package sowdb

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	pb "github.com/sowdb/sowdb/clients/go/sowdbpb/sowdb/v1"
)

// serviceName is the service whose health Ping asks (grpc.health.v1), as the other SDKs do.
const serviceName = "sowdb.v1.SowService"

// notServingKey is the trailer in which a server that is not serving says why.
const notServingKey = "sowdb-not-serving"

// Ping is the round trip of a grpc.health.v1 check of the sowdb service; a server that is up
// but not serving (recovering, fenced) is an Unavailable *Error saying why.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	var trailer metadata.MD
	resp, err := onReader(ctx, c, "ping", func(ch *channel) (*healthpb.HealthCheckResponse, error) {
		return ch.health.Check(ctx, &healthpb.HealthCheckRequest{Service: serviceName}, grpc.Trailer(&trailer))
	})
	if err != nil {
		return 0, err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		why := "server is not serving"
		if v := trailer.Get(notServingKey); len(v) > 0 {
			why = v[0]
		}
		return 0, &Error{Code: codes.Unavailable, Message: why, Metadata: map[string]string{}}
	}
	return time.Since(start), nil
}

// Stats is the server's figures (docs/operations.md): per topic, the subscriptions and their
// queues, and the server-wide ones. topic ("": every topic) is a name or a regular expression;
// topicsOnly leaves out the server-wide figures (what a caller without an admin role may ask).
func (c *Client) Stats(ctx context.Context, topic string, topicsOnly bool) (*pb.StatsResponse, error) {
	return onReader(ctx, c, "stats", func(ch *channel) (*pb.StatsResponse, error) {
		return ch.admin.Stats(ctx, &pb.StatsRequest{Topic: topic, TopicsOnly: topicsOnly})
	})
}
