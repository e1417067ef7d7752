#!/usr/bin/env python3
"""A stand-in for sbatch, for the cluster-generic executor plugin: reads the job's properties from the job
script Snakemake wrote (its ``# properties = {...}`` line: rule, resources), records where the job asked to go
(partition, GPUs, CPUs) in $FAKE_SBATCH_LEDGER, runs the job script locally in the background and prints a job
id, as ``sbatch --parsable`` does. Usage: fake_sbatch.py JOBSCRIPT"""

import json
import os
import subprocess
import sys
import time

jobscript = sys.argv[-1]
props = {}
with open(jobscript) as fh:
    for line in fh:
        if line.startswith("# properties = "):
            props = json.loads(line.split("=", 1)[1])
            break
res = props.get("resources", {})
job_id = f"{os.getpid()}{int(time.time() * 1000) % 100000}"
with open(os.path.join(os.environ.get("FAKE_SBATCH_LOGS", "."), f"job-{job_id}.log"), "w") as log:
    job = subprocess.Popen(
        ["/bin/bash", jobscript], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
with open(os.environ["FAKE_SBATCH_LEDGER"], "a") as fh:
    entry = {
        "id": job_id,
        "rule": props.get("rule"),
        "partition": res.get("slurm_partition"),
        "gpus": res.get("gpu", 0),
        "cpus": res.get("cpus_per_task"),
        "runtime": res.get("runtime"),
        "pid": job.pid,  # its own session: the test stops what is left of it
    }
    fh.write(json.dumps(entry) + "\n")
print(job_id)
