package io.sowdb.client;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real {@code sowd} for the tests, started through the one launcher of the Python and Node
 * tests, {@code python -m sowdb.testing} (port 0, a temporary data directory, a test config):
 * the launcher prints sowd's {@code listening on} banner and stops sowd on SIGTERM or when its
 * standard input closes, so a test JVM that dies leaves no server behind. The interpreter is
 * {@code $SOWDB_PYTHON}, else the repository's {@code .venv/bin/python}.
 */
final class Sowd implements AutoCloseable {
  static final Path REPO = Path.of("").toAbsolutePath().getParent().getParent();
  static final Pattern BANNER = Pattern.compile("listening on (\\S+)");

  final String address;
  final Process proc;
  final Path dataDir;
  private final Path dir;
  private final StringBuffer output;

  private Sowd(String address, Process proc, Path dir, Path dataDir, StringBuffer output) {
    this.address = address;
    this.proc = proc;
    this.dir = dir;
    this.dataDir = dataDir;
    this.output = output;
  }

  static String python() {
    String p = System.getenv("SOWDB_PYTHON");
    return p != null && !p.isEmpty() ? p : REPO.resolve(".venv/bin/python").toString();
  }

  /** The tests' topics: the one file the Python and Node tests read too. */
  static String testConfig() throws IOException {
    return Files.readString(REPO.resolve("tests/topics.toml"));
  }

  static Sowd start() throws Exception {
    return start(testConfig(), List.of(), null);
  }

  /** sowd with {@code config} (TOML text); {@code dataDir}: an earlier sowd's, to start it again. */
  static Sowd start(String config, List<String> extraArgs, Path dataDir) throws Exception {
    Path dir = Files.createTempDirectory("sowdb-java-");
    Path cfg = dir.resolve("sowd.toml");
    Files.writeString(cfg, config);
    Path data = dataDir != null ? dataDir : dir.resolve("data");
    List<String> cmd = new ArrayList<>(List.of(python(), "-m", "sowdb.testing", "--data-dir", data.toString(),
        "--config", cfg.toString()));
    cmd.addAll(extraArgs);
    ProcessBuilder pb = new ProcessBuilder(cmd).directory(REPO.toFile()).redirectErrorStream(true);
    pb.environment().put("PYTHONUNBUFFERED", "1");
    Process proc = pb.start();
    StringBuffer out = new StringBuffer();
    CompletableFuture<String> found = new CompletableFuture<>();
    Thread reader = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          out.append(line).append('\n');
          Matcher m = BANNER.matcher(line);
          if (m.find()) found.complete(m.group(1));
        }
      } catch (IOException e) {
        // the process ended
      }
      found.completeExceptionally(new IllegalStateException("sowd exited before its banner:\n" + out));
    }, "sowd-output");
    reader.setDaemon(true);
    reader.start();
    try {
      return new Sowd(found.get(60, TimeUnit.SECONDS), proc, dir, data, out);
    } catch (Exception e) {
      proc.destroyForcibly();
      throw new IllegalStateException("sowd did not start in 60 s:\n" + out, e);
    }
  }

  String output() {
    return output.toString();
  }

  /** {@code kill -9} of the sowd under the launcher (a crash); returns once the launcher is gone. */
  void kill9() throws Exception {
    for (ProcessHandle child : proc.children().toList()) {
      child.destroyForcibly();
    }
    proc.waitFor(30, TimeUnit.SECONDS);
  }

  @Override
  public void close() throws Exception {
    if (proc.isAlive()) {
      proc.destroy(); // SIGTERM: the launcher stops sowd
      if (!proc.waitFor(30, TimeUnit.SECONDS)) proc.destroyForcibly();
    }
    try (var paths = Files.walk(dir)) {
      paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}
