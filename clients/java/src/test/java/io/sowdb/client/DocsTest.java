package io.sowdb.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The Java pages run as written: every {@code java} block of docs/java.md and
 * clients/java/README.md is one of the files under clients/java/examples (compiled with the
 * tests), and every {@code sh} block runs here against a live sowd, as a reader would run it
 * after {@code make setup}. The cluster example runs in {@link ClusterTest}.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DocsTest {
  static final Path JAVA_PAGE = Sowd.REPO.resolve("docs/java.md");
  static final Path README = Sowd.REPO.resolve("clients/java/README.md");
  private static final Pattern BLOCK = Pattern.compile("(?m)^```(\\w+)\\n(.*?)^```$", Pattern.DOTALL);

  private Sowd sowd;
  private SowdbClient client;

  @BeforeAll
  void start() throws Exception {
    sowd = Sowd.start();
    client = SowdbClient.connect(sowd.address);
  }

  @AfterAll
  void stop() throws Exception {
    if (client != null) client.close();
    if (sowd != null) sowd.close();
  }

  /** The page's fenced blocks in the language {@code lang}. */
  static List<String> blocks(Path page, String lang) throws Exception {
    List<String> out = new ArrayList<>();
    Matcher m = BLOCK.matcher(Files.readString(page));
    while (m.find()) {
      if (m.group(1).equals(lang)) out.add(m.group(2));
    }
    return out;
  }

  @Test
  void everyJavaBlockOfThePagesIsAnExampleAsItIs() throws Exception {
    List<String> examples = new ArrayList<>();
    try (var files = Files.list(Sowd.REPO.resolve("clients/java/examples"))) {
      for (Path f : files.toList()) examples.add(Files.readString(f));
    }
    for (Path page : List.of(JAVA_PAGE, README)) {
      List<String> java = blocks(page, "java");
      assertTrue(java.size() >= 1, page + " shows no example");
      for (String b : java) assertTrue(examples.contains(b), page + " shows a block that is no file of examples/:\n" + b);
    }
  }

  /** A page's sh block run by bash from the repository's root, the server at SOWDB_ADDRESS. */
  static Process run(String block, Map<String, String> env) throws Exception {
    ProcessBuilder pb = new ProcessBuilder("bash", "-euc", block).directory(Sowd.REPO.toFile()).redirectErrorStream(true);
    pb.environment().putAll(env);
    return pb.start();
  }

  @Test
  void theReadmesTourRunsAsWritten() throws Exception {
    List<String> sh = blocks(README, "sh");
    assertEquals(1, sh.size());
    assertTrue(sh.get(0).contains("examples/QuickTour.java"));
    client.sowDelete("orders", "/orderId > 0");
    Process p = run(sh.get(0), Map.of("SOWDB_ADDRESS", sowd.address));
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(120, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue(), out);
    List<String> lines = out.lines().toList();
    assertTrue(lines.get(0).matches("published 2, last bookmark \\d+"), out);
    assertEquals("1 SYM1 at 120", lines.get(1), out);
    assertEquals("1 matched", lines.get(2), out);
    assertEquals("filter EXPRESSION_ERROR at column 9", lines.get(3), out);
  }

  @Test
  void theMirrorOfTheJavaPageRunsAndEndsByItself() throws Exception {
    client.sowDelete("orders", "/orderId > 0");
    client.publish("orders", List.of(
        Map.of("orderId", 1, "symbol", "SYM1", "price", 100),
        Map.of("orderId", 2, "symbol", "SYM1", "price", 110),
        Map.of("orderId", 3, "symbol", "SYM1", "price", 120),
        Map.of("orderId", 4, "symbol", "SYM2", "price", 130)));
    List<String> sh = blocks(JAVA_PAGE, "sh");
    assertEquals(1, sh.size());
    assertTrue(sh.get(0).contains("examples/MirrorExample.java"));
    Process p = run(sh.get(0), Map.of("SOWDB_ADDRESS", sowd.address, "SOWDB_SECONDS", "20"));
    List<String> lines = new ArrayList<>();
    List<String> expected = List.of("3 orders of SYM1", "order 5 at 140", "order 1 left (deleted); 3 now");
    StringBuilder all = new StringBuilder();
    try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
      String line;
      while ((line = r.readLine()) != null) {
        all.append(line).append('\n');
        if (line.startsWith("WARNING") || line.isBlank()) continue;
        lines.add(line);
        if (line.equals("3 orders of SYM1")) {
          client.publish("orders", List.of(Map.of("orderId", 5, "symbol", "SYM1", "price", 140)));
          client.publish("orders", List.of(Map.of("orderId", 6, "symbol", "SYM2", "price", 150))); // not SYM1
          client.sowDelete("orders", "/orderId = 1");
        }
        if (lines.size() == expected.size()) break;
      }
      assertEquals(expected, lines, all.toString());
      assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the example ends by itself (SOWDB_SECONDS)");
      assertEquals(0, p.exitValue(), all.toString());
    } finally {
      p.destroyForcibly();
    }
  }
}
