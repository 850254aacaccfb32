package io.sowdb.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.grpc.Status;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The token and TLS options against a secured sowd (SPEC §11): a self-signed certificate made by
 * openssl, two users whose tokens the users file keeps as SHA-256 hashes. A token is sent as
 * {@code authorization: Bearer TOKEN}; none, or a wrong one, is refused UNAUTHENTICATED.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SecurityTest {
  private Path dir;
  private Sowd sowd;
  private SowdbClient.Tls tls;

  private static String sha256(String token) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(token.getBytes(StandardCharsets.UTF_8)));
  }

  @BeforeAll
  void start() throws Exception {
    dir = Files.createTempDirectory("sowdb-java-secured-");
    Process p = new ProcessBuilder("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-keyout", dir.resolve("key.pem").toString(), "-out", dir.resolve("cert.pem").toString())
        .redirectErrorStream(true).start();
    p.getInputStream().readAllBytes();
    assertEquals(0, p.waitFor());
    Files.writeString(dir.resolve("users.toml"),
        "[[user]]\nname = \"ann\"\ntoken_sha256 = \"" + sha256("s3cret") + "\"\nroles = [\"fx\"]\n"
            + "[[user]]\nname = \"etl\"\ntoken_sha256 = \"" + sha256("l0ader") + "\"\nroles = [\"loader\"]\n");
    String security = "\n[security]\n"
        + "tls_cert = \"" + dir.resolve("cert.pem") + "\"\n"
        + "tls_key = \"" + dir.resolve("key.pem") + "\"\n"
        + "users_file = \"" + dir.resolve("users.toml") + "\"\n\n"
        + "[[role]]\nname = \"fx\"\nread = [\"orders\"]\nwrite = [\"orders\"]\nfilter = \"/desk = 'FX'\"\n\n"
        + "[[role]]\nname = \"loader\"\nwrite = [\"orders\"]\n";
    sowd = Sowd.start(Sowd.testConfig() + security, List.of(), null);
    tls = SowdbClient.Tls.ca(dir.resolve("cert.pem").toFile());
  }

  @AfterAll
  void stop() throws Exception {
    if (sowd != null) sowd.close();
    try (var paths = Files.walk(dir)) {
      paths.sorted(java.util.Comparator.reverseOrder()).forEach(x -> x.toFile().delete());
    }
  }

  private SowdbClient client(String token) {
    return SowdbClient.builder().address(sowd.address).tls(tls).token(token).build();
  }

  @Test
  void withTheCaAndATokenCallsGoThroughUnderTheRowEntitlement() {
    try (SowdbClient loader = client("l0ader")) {
      loader.publish("orders", List.of(Map.of("orderId", 1, "desk", "FX"), Map.of("orderId", 2, "desk", "EQ")));
    }
    try (SowdbClient ann = client("s3cret")) {
      List<Map<String, Object>> rows = ann.sow("orders").toList().stream().map(Record::map).toList();
      assertEquals(List.of(Map.of("orderId", 1, "desk", "FX")), rows);
      assertThrows(SowdbException.PermissionDenied.class, () -> ann.sow("quotes").toList());
    }
  }

  @Test
  void noTokenOrAWrongOneIsUnauthenticated() {
    for (String token : new String[] {null, "wrong"}) {
      try (SowdbClient c = client(token)) {
        SowdbException e = assertThrows(SowdbException.Unauthenticated.class, c::listTopics);
        assertEquals(Status.Code.UNAUTHENTICATED, e.code());
      }
    }
  }

  @Test
  void aPlaintextClientAgainstTheTlsPortFails() {
    try (SowdbClient c = SowdbClient.builder().address(sowd.address).token("s3cret").build()) {
      SowdbException e = assertThrows(SowdbException.class, c::listTopics);
      assertNotEquals(Status.Code.OK, e.code());
    }
  }
}
