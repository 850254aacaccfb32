package io.sowdb.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.TestInstance;

/**
 * The SDKs' shared cases ({@code clients/cases/cases.json}, its README says the format) run by
 * the Java SDK against a live sowd with {@code tests/topics.toml}: the Python, Node and Go SDKs
 * run the same table, so one call means one thing in every language.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SharedCasesTest {
  private Sowd sowd;

  @BeforeAll
  void start() throws Exception {
    sowd = Sowd.start();
  }

  @AfterAll
  void stop() throws Exception {
    if (sowd != null) sowd.close();
  }

  @TestFactory
  Stream<DynamicTest> sharedCases() throws Exception {
    JsonNode cases = Json.MAPPER.readTree(Sowd.REPO.resolve("clients/cases/cases.json").toFile()).get("cases");
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode c : cases) {
      tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> run(c)));
    }
    return tests.stream();
  }

  private void run(JsonNode c) {
    try (SowdbClient client = SowdbClient.connect(sowd.address)) {
      for (JsonNode step : c.get("steps")) {
        JsonNode expect = step.path("expect");
        if (expect.has("error")) {
          SowdbException e = assertThrows(SowdbException.class, () -> call(client, step));
          JsonNode want = expect.get("error");
          assertEquals(Status.Code.valueOf(want.get("code").asText()), e.code(), e.getMessage());
          if (want.has("field")) assertEquals(want.get("field").asText(), e.field(), e.fieldViolations().toString());
          if (want.has("reason")) assertEquals(want.get("reason").asText(), e.reason(), e.getMessage());
          if (want.has("column")) assertEquals(want.get("column").asInt(), e.column(), e.metadata().toString());
          continue;
        }
        Object got = call(client, step);
        if (expect.has("docs")) {
          List<JsonNode> want = new ArrayList<>();
          expect.get("docs").forEach(want::add);
          @SuppressWarnings("unchecked")
          List<JsonNode> docs = new ArrayList<>((List<JsonNode>) got);
          if (!step.has("order_by")) {
            Comparator<JsonNode> byText = Comparator.comparing(JsonNode::toString);
            want.sort(byText);
            docs.sort(byText);
          }
          assertEquals(want, docs);
        }
        if (expect.has("deleted")) assertEquals(expect.get("deleted").asLong(), (Long) got);
      }
    }
  }

  private static Object call(SowdbClient client, JsonNode step) {
    String topic = step.get("topic").asText();
    switch (step.get("op").asText()) {
      case "publish" -> {
        List<JsonNode> docs = new ArrayList<>();
        step.get("docs").forEach(docs::add);
        return client.publish(topic, docs);
      }
      case "delete" -> {
        return client.sowDelete(topic, step.get("filter").asText());
      }
      case "sow" -> {
        Query q = Query.of();
        if (step.has("filter")) q.filter(step.get("filter").asText());
        if (step.has("order_by")) q.orderBy(step.get("order_by").asText());
        if (step.has("top_n")) q.topN(step.get("top_n").asInt());
        if (step.has("batch_size")) q.batchSize(step.get("batch_size").asInt());
        if (step.has("select")) q.select(step.get("select").asText());
        if (step.has("grouping")) step.get("grouping").forEach(g -> q.grouping(g.asText()));
        if (step.has("projection")) step.get("projection").forEach(p -> q.projection(p.asText()));
        return client.sow(topic, q).toList().stream().map(Record::json).toList();
      }
      default -> throw new AssertionError("unknown op " + step.get("op"));
    }
  }
}
