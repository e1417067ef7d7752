"""Run Tensile with a target ISA it may not know yet (gfx90c, the RDNA APUs), without editing Tensile's files.

This file runs under *Tensile's* Python (the interpreter whose ``import Tensile`` works, which need not have
oto installed), so it uses the standard library only. oto invokes it as a script:

    <tensile-python> tensile_runtime.py probe [REG...]         JSON: version, ISAs, which targets are native
    <tensile-python> tensile_runtime.py tensile [REG...] ARGS  the ``Tensile`` benchmark program
    <tensile-python> tensile_runtime.py tcl [REG...] ARGS      ``TensileCreateLibrary``
    <any-python>     tensile_runtime.py null-client ARGS...    stand-in client for build-only runs

``REG`` is ``--oto-register ISA=DONOR`` (e.g. ``gfx90c=gfx900``), one per ISA the arch profiles say takes its
Tensile capabilities from another (``tensile.caps_from``); oto derives them from the profile
(:func:`oto.tensile.install.registrations`) and this file hard-codes none.

The registration rule (research/tensile.md §5, §8): Tensile 4.44 has no gfx90c (ISA 9.0.12) or gfx902 in
``SupportedISA``, ``architectureMap`` or its assembler-capability cache, nor the RDNA APUs gfx1035 (10.3.5),
gfx1103 (11.0.3) and gfx1150 (11.5.0). Each has a donor of its own family that Tensile knows, with the same
assembler capabilities in Tensile's cache (gfx900 for the Vega APUs: no MFMA, no dot, no fmac, MaxVmcnt 63;
gfx1030, gfx1102 and gfx1151 for the RDNA ones), and Tensile's hard-coded ``GetArchCaps`` derives the rest
from the ISA number itself (wave32 on GFX10+). So, when the installed Tensile lacks a target ISA named by
``--arch``/``--architecture`` and a registration names its donor, we register it in-process before
Tensile's entry point runs:

1. append it to ``SupportedISA`` in both ``globalParameters`` and ``defaultGlobalParameters`` (Tensile
   restores the defaults at start-up) and to ``validISA`` (the ``ISA`` parameter's legal values);
2. add ``architectureMap[name] = name`` so logic files named ``gfx90c_*.yaml`` are selected (an ISA Tensile
   already names keeps its name: gfx1035's logic files are ``rembrandt_*.yaml``);
3. wrap ``getCapabilitiesCache`` so its table has an entry for the ISA copied from the donor;
   without it, Tensile's derived-vs-cached caps comparison raises KeyError on ROCm >= 5.3.

Tensile's joblib workers are forked from this process and inherit the registration. A Tensile that already
knows the ISA is left untouched. For TensileCreateLibrary, the logic files are also taken in sorted order
(Tensile takes them in file-system order), so the library it writes does not depend on the machine.
Nothing else (the C++ host library, rocBLAS) is patched: a library labelled gfx90c loads only in a rocBLAS
that knows gfx90c; the gfx900 label is the drop-in route (docs/tensile.md).
"""

from __future__ import annotations

import json
import os
import sys

REGISTER_FLAG = "--oto-register"


def isa_of(name: str) -> tuple[int, int, int]:
    """'gfx90c' -> (9, 0, 12): the last two hex digits are minor and stepping (Tensile's gfxArch)."""
    digits = name.lower().removeprefix("gfx").split(":")[0]
    if len(digits) < 3:
        raise ValueError(f"not a gfx architecture name: {name!r}")
    return int(digits[:-2]), int(digits[-2], 16), int(digits[-1], 16)


def name_of(isa) -> str:
    return "gfx" + "".join(map(str, isa[:-2])) + "".join(f"{x:x}" for x in isa[-2:])


def register(isa: tuple[int, int, int], donor: tuple[int, int, int]) -> bool:
    """Make the imported Tensile know ``isa`` with ``donor``'s capabilities; False if it already did."""
    from Tensile import AsmCaps, Common

    if isa in Common.globalParameters["SupportedISA"]:
        return False
    for params in (Common.globalParameters, Common.defaultGlobalParameters):
        if isa not in params["SupportedISA"]:
            params["SupportedISA"].append(isa)
    if isa not in Common.validISA:
        Common.validISA.append(isa)
    name = name_of(isa)
    Common.architectureMap.setdefault(name, name)
    original = AsmCaps.getCapabilitiesCache

    def with_isa(*args, **kwargs):
        caps = original(*args, **kwargs)
        caps.setdefault(isa, dict(caps[donor]))
        return caps

    AsmCaps.getCapabilitiesCache = with_isa
    Common.getCapabilitiesCache = with_isa  # Common imported the name; patch its binding too
    _asm_cache_file_with(isa, donor)
    return True


def _asm_cache_file_with(isa: tuple[int, int, int], donor: tuple[int, int, int]) -> None:
    """An ``--asm-cache`` file written by a run that did not register ``isa`` (or by a plain Tensile) has no
    entry for it, and Tensile takes the AsmCaps from the file alone: give the loaded cache the donor's."""
    try:
        from Tensile import LibraryIO
    except ImportError:  # a Tensile without the cache file (older versions)
        return
    original = LibraryIO.initAsmCapsCache

    def with_isa(*args, **kwargs):
        cache = original(*args, **kwargs)
        if cache and donor in cache:
            cache.setdefault(isa, dict(cache[donor]))
        return cache

    LibraryIO.initAsmCapsCache = with_isa


def _target_isas(argv: list[str]) -> list[tuple[int, int, int]]:
    """The ISAs named by --arch / --architecture (Tensile and TensileCreateLibrary spellings)."""
    names: list[str] = []
    for i, arg in enumerate(argv):
        for flag in ("--arch", "--architecture"):
            if arg == flag and i + 1 < len(argv):
                names += argv[i + 1].replace("_", ";").split(";")
            elif arg.startswith(flag + "="):
                names += arg.split("=", 1)[1].replace("_", ";").split(";")
    out = []
    for n in names:
        try:
            out.append(isa_of(n))
        except ValueError:
            continue  # 'all' and the like
    return out


def registrations_of(argv: list[str]) -> tuple[dict[tuple[int, int, int], tuple[int, int, int]], list[str]]:
    """Split ``--oto-register ISA=DONOR`` options off ``argv``: ({isa: donor isa}, the other arguments)."""
    found: dict[tuple[int, int, int], tuple[int, int, int]] = {}
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == REGISTER_FLAG or arg.startswith(REGISTER_FLAG + "="):
            value = arg.split("=", 1)[1] if "=" in arg else next(args, "")
            name, _, donor = value.partition("=")
            if not donor:
                raise SystemExit(f"tensile_runtime: {REGISTER_FLAG} needs ISA=DONOR, got {value!r}")
            found[isa_of(name)] = isa_of(donor)
        else:
            rest.append(arg)
    return found, rest


def _register_targets(argv: list[str], donors: dict[tuple[int, int, int], tuple[int, int, int]]) -> list[str]:
    done = []
    for isa in _target_isas(argv):
        if isa in donors and register(isa, donors[isa]):
            done.append(f"{name_of(isa)} (caps of {name_of(donors[isa])})")
    if done:
        print(f"oto: registered {', '.join(done)} in Tensile at run time", flush=True)
    return done


def probe(donors: dict[tuple[int, int, int], tuple[int, int, int]] | None = None) -> dict:
    """Tensile's version, whether it knows each ISA oto would register (``donors``) natively, and the name
    its architectureMap gives the ISA's logic files (None: none, registering names them after the ISA)."""
    import Tensile
    from Tensile import Common

    supported = [list(i) for i in Common.globalParameters["SupportedISA"]]
    return {
        "version": Tensile.__version__,
        "path": os.path.dirname(Tensile.__file__),
        "python": sys.executable,
        "supported_isa": supported,
        "native": {name_of(i): list(i) in supported for i in donors or {}},
        "logic_names": {name_of(i): Common.architectureMap.get(name_of(i)) for i in donors or {}},
    }


def _sorted_logic_files(tcl) -> None:
    """TensileCreateLibrary merges logic files in ``Path.rglob`` order, i.e. the file system's: solution
    numbering and the order of tied Matching rows would change with it. Sorted by path, the library is the
    same on every machine (and equals oto's own writer, oto.tensile.native_library)."""
    find = tcl.findLogicFiles

    def sorted_find(*args, **kwargs):
        return sorted(find(*args, **kwargs))

    tcl.findLogicFiles = sorted_find


def null_client(argv: list[str]) -> int:
    """Stand-in for tensile_client in build-only runs: writes an empty results file and succeeds, so Tensile
    finishes kernel generation and assembly with rc 0 and nothing is timed."""
    ini = None
    for i, arg in enumerate(argv):
        if arg == "--config-file" and i + 1 < len(argv):
            ini = argv[i + 1]
        elif arg.startswith("--config-file="):
            ini = arg.split("=", 1)[1]
    if "--best-solution" in argv or ini is None:
        return 0
    with open(ini) as fh:
        results = [line.split("=", 1)[1].strip() for line in fh if line.startswith("results-file=")]
    for path in results:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        open(path, "w").close()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(__doc__)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "null-client":
        return null_client(rest)
    donors, rest = registrations_of(rest)
    if cmd == "probe":
        print(json.dumps(probe(donors)))
        return 0
    if cmd in ("tensile", "tcl"):
        _register_targets(rest, donors)
        sys.argv = ["Tensile" if cmd == "tensile" else "TensileCreateLibrary", *rest]
        if cmd == "tensile":
            from Tensile.Tensile import main as entry
        else:
            from Tensile import TensileCreateLibrary as tcl

            _sorted_logic_files(tcl)
            entry = tcl.TensileCreateLibrary
        result = entry()
        return int(result or 0) if isinstance(result, int) else 0
    print(f"tensile_runtime: unknown command {cmd!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    # Run as a script, this file's folder (oto's package dir) would shadow stdlib names; drop it.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    raise SystemExit(main())
