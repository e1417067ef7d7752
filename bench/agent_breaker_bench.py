"""What a hung agent endpoint costs a run of mutate jobs, with the circuit breaker and without it.

A local HTTP server accepts every Messages API request and never answers within the timeout (a hung proxy or
gateway). ``--jobs`` mutate-sized agent calls run one after another (as the ``llm_api`` resource serialises
them in a run), sharing one results folder, with the default retries and backoff; the timeout is scaled down
(``--timeout``, default 1 s) so the benchmark takes seconds. The table gives the measured wall time and
requests, and the time those requests would wait at the default ``agent.timeout_s`` (120 s; backoff not
included).

    python bench/agent_breaker_bench.py [--jobs 6] [--timeout 1.0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from oto.agent.digest import tensile_digest  # noqa: E402
from oto.agent.engine import propose  # noqa: E402
from oto.agent.settings import AgentSettings  # noqa: E402
from oto.config import config_defaults  # noqa: E402
from oto.gemm import Library  # noqa: E402
from oto.hardware.profile import load_profile  # noqa: E402
from oto.search.tensile_space import tensile_space  # noqa: E402
from oto.tensile import legality  # noqa: E402


def hung_server(hold_s: float) -> tuple[ThreadingHTTPServer, list[float]]:
    seen: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            return

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length", 0)))
            seen.append(time.monotonic())
            time.sleep(hold_s)  # never answers in time

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server, seen


def run_arm(
    url: str, jobs: int, timeout: float, breaker_failures: int, seen: list[float]
) -> tuple[float, int]:
    profile = load_profile(REPO / "arch_profiles" / "gfx90c.yaml")
    library = Library.parse("Cijk_Ailk_Bljk_SB")
    space = tensile_space(library, legality.Limits.from_profile(profile))
    digest = tensile_digest(library, 1, None, [], profile)
    defaults = config_defaults("agent")
    settings = AgentSettings(
        base_url=url,
        timeout_s=timeout,
        max_retries=defaults["max_retries"],
        backoff_s=0.05,  # scaled down like the timeout; the default doubling is kept
        breaker_failures=breaker_failures,
    )
    before = len(seen)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        for job in range(jobs):
            propose(
                space, digest, {"arch": "gfx90c"}, 4, frozenset(), settings, "sk-bench-key",
                Path(tmp) / "agent" / "ledger.json", None, job=f"bench/gen{job}",
            )  # fmt: skip
        return time.monotonic() - t0, len(seen) - before


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--timeout", type=float, default=1.0)
    args = ap.parse_args(argv)
    server, seen = hung_server(hold_s=args.timeout * 3)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    defaults = config_defaults("agent")
    n = defaults["breaker_failures"]
    timeout_note = f"timeout {args.timeout:g} s (default {defaults['timeout_s']} s)"
    print(f"{args.jobs} mutate jobs against a hung endpoint, {timeout_note},")
    print(f"max_retries {defaults['max_retries']}, breaker_failures {n} (off: 100)\n")
    print(f"| arm | requests | wall s | per job s | waited at the default timeout, all {args.jobs} jobs |")
    print("|---|---|---|---|---|")
    for name, failures in (("no breaker (before)", 100), (f"breaker after {n} failures", n)):
        wall, requests = run_arm(url, args.jobs, args.timeout, failures, seen)
        waited = requests * defaults["timeout_s"]  # each request waits out the timeout
        print(f"| {name} | {requests} | {wall:.2f} | {wall / args.jobs:.2f} | {waited / 60:.0f} min |")
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
