"""oto merge from remote storage through Snakemake's storage plugin (snakemake-storage-plugin-s3), against a
real S3-compatible server this test starts on 127.0.0.1 (moto in server mode). Credentials reach the plugin
through its SNAKEMAKE_STORAGE_S3_* variables and are never written into the results."""

from __future__ import annotations

import pytest
import yaml
from fleet_helpers import make_root, oto, rebuild, synthetic_bundle
from workflow_helpers import REPO

pytest.importorskip("moto")
pytest.importorskip("snakemake_storage_plugin_s3")
SECRET = "moto-s3cr3t-FLEET-key-42"


@pytest.fixture
def s3():
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id="fleet-access",
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
    )
    client.create_bucket(Bucket="oto-bundles")
    env = {
        "SNAKEMAKE_STORAGE_S3_ENDPOINT_URL": url,
        "SNAKEMAKE_STORAGE_S3_ACCESS_KEY": "fleet-access",
        "SNAKEMAKE_STORAGE_S3_SECRET_KEY": SECRET,
    }
    yield client, env
    server.stop()


def test_merge_from_s3(tmp_path, s3):
    client, env = s3
    good = synthetic_bundle(tmp_path, name="good")
    other = synthetic_bundle(
        tmp_path, name="other", machine=make_root(tmp_path, name="m2", machine_id="b" * 32), score=1.1
    )
    bad = rebuild(good, lambda m: m.pop("bundle.yaml"), out=tmp_path / "bad.oto.tar.gz")
    for f in (good, bad):
        client.upload_file(str(f), "oto-bundles", f"night1/{f.name}")
    client.put_object(Bucket="oto-bundles", Key="night1/README.txt", Body=b"not a bundle")
    out = tmp_path / "results"
    proc = oto(REPO, "merge", "s3://oto-bundles/night1", "--numbers", "simulated", "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "merged 1 bundle(s) from 1 device(s)" in proc.stdout and "1 rejected" in proc.stdout
    assert "no bundle.yaml" in proc.stdout
    arch = out / "gfx90c"
    assert (arch / "TensileLibrary.dat").is_file() and (arch / "acceptance.md").is_file()

    # the next night: a new upload; the same command fetches it and keeps what was merged
    client.upload_file(str(other), "oto-bundles", f"night1/{other.name}")
    proc = oto(REPO, "merge", "s3://oto-bundles/night1", "--numbers", "simulated", "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load((arch / "fleet/merge.yaml").read_text())
    assert len(doc["bundles"]["accepted"]) == 2 and len(doc["devices"]) == 2
    text = b"".join(p.read_bytes() for p in arch.rglob("*") if p.is_file())
    assert SECRET.encode() not in text and b"fleet-access" not in text


def test_an_unreachable_store_fails_clearly(tmp_path):
    env = {
        "SNAKEMAKE_STORAGE_S3_ENDPOINT_URL": "http://127.0.0.1:9",
        "SNAKEMAKE_STORAGE_S3_ACCESS_KEY": "x",
        "SNAKEMAKE_STORAGE_S3_SECRET_KEY": "y",
    }
    proc = oto(REPO, "merge", "s3://oto-bundles/none", "--out", str(tmp_path), env=env, timeout=600)
    assert proc.returncode == 1 and "fetching bundles from s3://oto-bundles/none failed" in proc.stderr


def test_the_fetch_workflow_is_lint_clean(tmp_path):
    import subprocess
    import sys

    from oto.fleet.remote import FETCH_WORKFLOW

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(FETCH_WORKFLOW),
            "--lint",
            "--config",
            "source=s3://b/p",
            "--workflow-profile",
            "none",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Congratulations, your workflow is in a good condition" in proc.stdout + proc.stderr
