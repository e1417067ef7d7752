# oto: tune rocBLAS/Tensile GEMM kernels for an AMD GPU, one generation at a time.
#   snakemake --cores 1 results/gfx90c/TensileLibrary.dat
# Stage rules live in rules/*.smk; config validation and input functions in rules/common.smk.

import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.19")
sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))  # the oto package of this checkout
from oto.config import ConfigError, checked_config_file
from snakemake.exceptions import WorkflowError

try:  # a YAML error is named by file and line (Snakemake's loader would not say where)
    CONFIG_FILE = checked_config_file("config/config.yaml")
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None


configfile: CONFIG_FILE


report: "workflow/report/workflow.rst"


include: "rules/common.smk"
include: "rules/ceilings.smk"
include: "rules/deck.smk"
include: "rules/budget.smk"
include: "rules/mutate.smk"
include: "rules/emit.smk"
include: "rules/compile.smk"
include: "rules/benchmark.smk"
include: "rules/normalise.smk"
include: "rules/select.smk"
include: "rules/finalize.smk"
include: "rules/clients.smk"
include: "rules/package.smk"
include: "rules/dashboard.smk"
include: "rules/registry.smk"


onstart:
    start_run()
    # for the progress line's first estimate: the backend's seconds per GPU job, this machine's probe, and
    # what the run resumes
    record_run_estimate(PLAN, jobs_already_done())


rule all:
    default_target: True
    input:
        f"results/{ARCH}/TensileLibrary.dat",
        f"results/{ARCH}/dashboard/index.html",
        f"results/{ARCH}/registry/consolidated.yaml",
