import io.sowdb.client.Event;
import io.sowdb.client.Mirror;
import io.sowdb.client.Query;
import io.sowdb.client.SowdbClient;
import io.sowdb.client.Subscription;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

public class MirrorExample {
  public static void main(String[] args) {
    String address = System.getenv().getOrDefault("SOWDB_ADDRESS", "127.0.0.1:9007");
    long seconds = Long.parseLong(System.getenv().getOrDefault("SOWDB_SECONDS", "10"));
    try (SowdbClient client = SowdbClient.builder().address(address).build(); // .token(...), .tls(...)
        Subscription sub = client.sowAndSubscribe("orders", Query.of().filter("/symbol = 'SYM1'").oof(true))) {
      Mirror mirror = new Mirror(); // keyed by (topic, SowKey)
      CompletableFuture.delayedExecutor(seconds, TimeUnit.SECONDS).execute(sub::close); // ends in 10 s
      for (Event event : sub) {
        mirror.apply(event); // query results, publishes, oof and deletes
        switch (event.kind()) { // each kind has its own fields
          case GROUP_END -> System.out.println(mirror.size() + " orders of SYM1");
          case PUBLISH -> event.records().forEach(r -> System.out.println(
              "order " + r.map().get("orderId") + " at " + r.map().get("price")));
          case OOF -> System.out.println("order " + event.records().get(0).sowKey()
              + " left (" + event.reason() + "); " + mirror.size() + " now");
          default -> {}
        }
      }
    }
  }
}
