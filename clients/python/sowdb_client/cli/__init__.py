"""``sow``: the command-line client, after AMPS's ``spark`` (SPEC §7).

    sow [-server HOST[:PORT][,...]] [-token T | -tokenfile F] COMMAND [flags]   (sow COMMAND --help: its flags)
    sow ping
    sow publish           -topic T [-file F] [-delimiter B] [-delta] [-rate N] [-batchsize N] [-sowkey K]
                          [-expiration S] [-producer ID [-producerseq N]]
                          [-format summary|full|bookmark]
    sow sow               -topic T [-filter F] [-orderby O] [-topn N] [-skipn N] [-batchsize N]
                          [-bookmark B] [-sowkeys K,...|JSON] [-sowkey K ...] [-queryid Q]
                          [-grouping G -projection P] [-select S] [-format data|full|TEMPLATE]
    sow sow_delete        -topic T (-filter F | -sowkeys K,...|JSON | -sowkey K ... | -data JSON)
    sow subscribe         -topic T [-filter F] [-bookmark B] [live flags]
    sow sow_and_subscribe -topic T [query flags] [live flags]
    sow topics            [-format table|json]
    sow stats             [-topic T] [-topicsonly] [-format table|json]
    sow cluster           [-format table|json]
    live flags: [-oof] [-delta] [-noempties] [-conflation S [-conflationkey K]] [-timeout S]
                [-count N] [-subid ID] [-format data|full|TEMPLATE]
    TEMPLATE: AMPS spark's, e.g. -format "{bookmark} {sow_key} {data}" (sowdb_client.cli.formats)

The server is ``-server`` (before or after the command), else ``$SOW_SERVER``, else
127.0.0.1:9007; a host without a port means port 9007; a cluster's servers are a list,
``-server h1,h2,h3`` (writes find the primary, subscriptions resume elsewhere: SPEC §13, HA-5).
Results go to stdout, one JSON document a line (``-format full``: one JSON object a line with
the frame's command and metadata), so they can be piped (``| head`` ends quietly); notes,
summaries and errors go to stderr. Errors are one line and exit 1; wrong flags exit 2; Ctrl-C
exits 130.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO

from sowdb_client.cli.args import UsageError, check, parser
from sowdb_client.cli.live import run_sow_and_subscribe, run_subscribe
from sowdb_client.cli.output import describe
from sowdb_client.cli.publish import run_publish
from sowdb_client.cli.query import run_sow, run_sow_delete, run_topics
from sowdb_client.cli.stats import run_cluster, run_stats
from sowdb_client.client import Client
from sowdb_client.errors import SowdbError
from sowdb_client.types import Tls

Handler = Callable[[Client, argparse.Namespace, IO[str]], int]


def run_ping(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    took = c.ping()
    print(f"pong from {a.server} in {took * 1000:.1f} ms", file=out)
    return 0


HANDLERS: dict[str, Handler] = {
    "ping": run_ping,
    "publish": run_publish,
    "sow": run_sow,
    "sow_delete": run_sow_delete,
    "subscribe": run_subscribe,
    "sow_and_subscribe": run_sow_and_subscribe,
    "topics": run_topics,
    "stats": run_stats,
    "cluster": run_cluster,
}


def read_token_file(path: str) -> str:
    """The token in ``path`` (its first line), with a one-line warning on stderr when the file
    may be read by its group or by others: a token is a password (issue 36).

    Raises:
        UsageError: the file is empty.
        OSError: it cannot be read.
    """
    with open(path, encoding="utf-8") as f:
        mode = os.fstat(f.fileno()).st_mode
        token = f.readline().strip()
    if mode & 0o077:
        print(
            f"sow: warning: token file {path} may be read by its group or others (mode {mode & 0o777:o}): "
            f"chmod 600 {path}",
            file=sys.stderr,
        )
    if not token:
        raise UsageError(f"-tokenfile {path}: the file holds no token (its first line is empty)")
    return token


def tls_settings(a: argparse.Namespace) -> Tls | None:
    """The TLS of the connection flags: -tls, or -cacert, -cert/-key, -servername."""
    if not (a.tls or a.cacert or a.cert):
        return None
    return Tls(ca=a.cacert, cert=a.cert, key=a.key, server_name=a.servername)


def main(argv: Sequence[str] | None = None, *, out: IO[str] | None = None) -> int:
    args = parser().parse_args(argv)
    stdout = out or sys.stdout
    try:
        check(args)
        token = read_token_file(args.tokenfile) if args.tokenfile else args.token
        with Client(args.server, token=token, tls=tls_settings(args)) as c:
            status = HANDLERS[args.command](c, args, stdout)
            stdout.flush()  # inside the try: a reader that has gone shows here at the latest
            return status
    except UsageError as exc:
        print(f"sow {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except SowdbError as exc:
        print(f"sow: {describe(exc, args.server)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        _discard_stdout(stdout)
        return 0
    except OSError as exc:
        print(f"sow: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _discard_stdout(stdout: IO[str]) -> None:
    """The reader of stdout has gone (``sow ... | head``): a normal end, not an error.

    What is still buffered would fail again when Python flushes stdout at exit, so stdout is
    pointed at /dev/null (the way the Python documentation recommends for SIGPIPE).
    """
    if stdout is sys.stdout:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
