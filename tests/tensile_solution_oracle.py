"""Run under Tensile's Python: Tensile's own Solution() verdict for each candidate (stdlib + Tensile only).

stdin: JSON list of {"problem_type": {...}, "params": {...}, "isa": [M, m, s], "caps_from": [M, m, s]};
stdout: JSON list of [valid, [reject reasons]] (valid is true/false, or "exception: ..." when Solution()
raised).
"isa" is the ISA an assembly kernel is built for (default gfx90c, [9, 0, 12]); "caps_from" the ISA whose
assembler capabilities it takes when Tensile's cache has no entry of its own (default gfx900), as oto's
tensile/runtime.py registers it. Tensile's GetArchCaps gives every ISA its own architecture caps."""

import contextlib
import io
import json
import sys

from Tensile.AsmCaps import getCapabilitiesCache
from Tensile.Common import GetArchCaps, SemanticVersion, globalParameters
from Tensile.SolutionStructs import Solution

items = json.load(sys.stdin)
caps = getCapabilitiesCache(SemanticVersion(6, 3, 0))
for item in items:
    isa = tuple(item.get("isa", (9, 0, 12)))
    if isa not in caps:
        caps[isa] = dict(caps[tuple(item.get("caps_from", (9, 0, 0)))])
globalParameters["AsmCaps"] = caps
globalParameters["ArchCaps"] = {i: GetArchCaps(i) for i in caps}
globalParameters["PrintSolutionRejectionReason"] = True

out = []
for item in items:
    # JSON turned int dict keys (AssertStrideAEqual: {0: 1}) into strings; Tensile compares them as ints
    state = {
        k: {int(a) if a.isdigit() else a: b for a, b in v.items()} if isinstance(v, dict) else v
        for k, v in item["params"].items()
    }
    state["ProblemType"] = item["problem_type"]
    asm = state.get("KernelLanguage", "Assembly") == "Assembly"
    state["ISA"] = list(item.get("isa", (9, 0, 12))) if asm else [0, 0, 0]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            valid = bool(Solution(state)["Valid"])
        except Exception as exc:  # Tensile asserts on some combinations instead of rejecting them
            valid = f"exception: {exc!r}"[:200]
    rejects = [ln[len("reject: ") :] for ln in buf.getvalue().splitlines() if ln.startswith("reject: ")]
    out.append([valid, rejects])
json.dump(out, sys.stdout)
