import io.sowdb.client.PublishAck;
import io.sowdb.client.Query;
import io.sowdb.client.Record;
import io.sowdb.client.SowResult;
import io.sowdb.client.SowdbClient;
import io.sowdb.client.SowdbException;
import java.time.Duration;
import java.util.List;
import java.util.Map;

public class QuickTour {
  public static void main(String[] args) {
    String address = System.getenv().getOrDefault("SOWDB_ADDRESS", "127.0.0.1:9007");
    try (SowdbClient client = SowdbClient.connect(address)) {
      PublishAck ack = client.publish("orders", List.of( // maps, JsonNodes, beans or JSON text; 100 per request
          Map.of("orderId", 1, "symbol", "SYM1", "price", 120),
          Map.of("orderId", 2, "symbol", "SYM2", "price", 80)));
      System.out.println("published " + ack.count() + ", last bookmark " + ack.lastBookmark());
      Query q = Query.of().filter("/price > 100").orderBy("/price DESC").topN(10).timeout(Duration.ofSeconds(5));
      try (SowResult result = client.sow("orders", q)) {
        for (Record r : result) System.out.println(r.sowKey() + " " + r.map().get("symbol") + " at " + r.map().get("price"));
        System.out.println(result.groupEnd().getRecordsMatched() + " matched");
      }
      try {
        client.sow("orders", Query.of().filter("/price >")).toList();
      } catch (SowdbException.InvalidArgument e) { // the status's BadRequest and ErrorInfo, typed
        System.out.println(e.field() + " " + e.reason() + " at column " + e.column());
      }
    }
  }
}
