// Package sowdb is the Go client of sowdb, the State-of-the-World server: publish JSON
// documents, query the state of a topic, subscribe to every change with the query and the
// subscription placed at one atomic point, and keep a local Mirror exact.
//
// It mirrors the Python and Node SDKs call for call (clients/cases/cases.json is the table of
// calls each SDK runs): NewClient, Publish, Sow, Subscribe, SowAndSubscribe, SowDelete,
// ReplaceSubscription, ListTopics, Stats, ClusterStatus, Ping. Streams are range-over-func iterators
// (iter.Seq2[T, error]); every call takes a context for deadlines and cancellation; every failure
// is an *Error carrying the gRPC code and the status's google.rpc.BadRequest and ErrorInfo
// details. Given the servers of a cluster, writes follow the primary across failovers and
// subscriptions resume by bookmark (rule HA-5).
//
// The generated messages and gRPC stubs are in the sowdbpb/sowdb/v1 package (buf generate from
// proto/; `make generate` at the repository root).
package sowdb
