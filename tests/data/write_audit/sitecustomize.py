"""Records, in every Snakemake job's script process, the files it writes (tests/test_declared_outputs.py).

Put on ``PYTHONPATH`` with ``OTO_WRITE_AUDIT`` naming a folder: each job process (one whose ``__main__``
holds Snakemake's ``snakemake`` object) writes ``<pid>.json`` there at exit: its rule, declared outputs and
log, and every path it opened for writing, renamed onto or opened as a writable SQLite database, as given
(relative to the job's working directory, or absolute). Processes that are not a job's script record nothing.
"""

import atexit
import json
import os
import sys

AUDIT = os.environ.get("OTO_WRITE_AUDIT")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

if AUDIT:
    written: list[str] = []
    busy = [False]

    def _hook(event: str, args: tuple) -> None:
        if busy[0]:
            return
        if event == "open":
            path, mode, flags = args
            if isinstance(path, int) or path is None:
                return
            writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & WRITE_FLAGS)
            if writes:
                written.append(os.fsdecode(path))
        elif event in ("os.rename", "os.replace"):
            written.append(os.fsdecode(args[1]))
        elif event == "sqlite3.connect" and isinstance(args[0], (str, bytes, os.PathLike)):
            database = os.fsdecode(args[0])  # SQLite opens its files in C, past the "open" event
            if "mode=ro" not in database:
                written.append(database.removeprefix("file:").split("?")[0])

    def _dump() -> None:
        smk = getattr(sys.modules.get("__main__"), "snakemake", None)
        if smk is None:
            return
        busy[0] = True
        record = {
            "rule": smk.rule,
            "cwd": os.getcwd(),
            "outputs": [str(p) for p in smk.output],
            "log": [str(p) for p in smk.log],
            "written": written,
        }
        with open(os.path.join(AUDIT, f"{os.getpid()}.json"), "w") as fh:
            json.dump(record, fh)

    sys.addaudithook(_hook)
    atexit.register(_dump)
