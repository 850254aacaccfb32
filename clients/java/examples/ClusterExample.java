import io.sowdb.client.PublishAck;
import io.sowdb.client.SowdbClient;
import io.sowdb.v1.ClusterNode;
import java.time.Duration;
import java.util.List;
import java.util.Map;

public class ClusterExample {
  public static void main(String[] args) {
    // the servers of a cluster (rule HA-5): one string with commas, or .servers(List.of(...))
    String servers = System.getenv().getOrDefault("SOWDB_SERVERS", "127.0.0.1:9007,127.0.0.1:9008,127.0.0.1:9009");
    try (SowdbClient client = SowdbClient.builder()
        .address(servers)
        .failoverTimeout(Duration.ofSeconds(30)) // how long a call looks for the primary again after a failover
        .readFrom("primary") // or "any": queries and subscriptions on any node, replicas included
        .build()) {
      PublishAck ack = client.publish("orders", List.of(Map.of("orderId", 7, "symbol", "SYM1", "price", 100)));
      System.out.println("stored at bookmark " + ack.lastBookmark()); // on the primary
      for (ClusterNode n : client.clusterStatus()) {
        System.out.println(n.getNode() + " is " + n.getRole() + ", applied " + n.getAppliedBookmark());
      }
    }
  }
}
