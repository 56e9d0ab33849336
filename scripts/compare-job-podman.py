#!/usr/bin/env python3
"""Runs deploy/compare-job.yaml on one machine, without Kubernetes: each pod's command, as
the manifest writes it, in the image with podman (or docker), then compares the merged
report with an unsharded one.

    scripts/compare-job-podman.py IMAGE RESULTS_DIR [--reference DIR] [--engine docker]

The Indexed Job's pods run one after another (JOB_COMPLETION_INDEX = 0..N-1), then the merge
Job's pod, all with RESULTS_DIR mounted at /results as the manifest's volume. With
--reference DIR (an unsharded `locksim compare --out DIR`), the merged report.json must equal
DIR/report.json byte for byte once each report's own folder is taken out of its paths; the
script exits 1 if it does not. Needs PyYAML (Debian: python3-yaml).
"""

import argparse
import pathlib
import shlex
import subprocess
import sys
import time

import yaml

MANIFEST = pathlib.Path(__file__).resolve().parent.parent / "deploy" / "compare-job.yaml"


def pod_command(job):
    container = job["spec"]["template"]["spec"]["containers"][0]
    return container["command"], container["args"]


def run_pod(engine, image, results, job, env):
    command, args = pod_command(job)
    env_flags = [flag for k, v in env.items() for flag in ("-e", f"{k}={v}")]
    started = time.monotonic()
    code = subprocess.run(
        [engine, "run", "--rm", *env_flags, "-v", f"{results}:/results"]
        + ["--entrypoint", command[0], image, *command[1:], *args]
    ).returncode
    return code, time.monotonic() - started


def merge_out(job):
    """The merge pod's --out: the folder its report's paths name, inside the pod."""
    command, args = pod_command(job)
    words = shlex.split(" ".join(command[1:] + args))
    return pathlib.PurePosixPath(words[words.index("--out") + 1])


def same_report(merged, merged_dir, reference_dir):
    """Whether two report.json files agree once each report's own folder is taken out of them:
    `merged` is the host's copy of the report the merge pod wrote into `merged_dir`."""
    ours = (merged / "report.json").read_text().replace(str(merged_dir), "OUT")
    theirs = (reference_dir / "report.json").read_text().replace(str(reference_dir), "OUT")
    return ours == theirs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("image")
    p.add_argument("results", type=pathlib.Path)
    p.add_argument("--reference", type=pathlib.Path)
    p.add_argument("--engine", default="podman")
    p.add_argument("--manifest", type=pathlib.Path, default=MANIFEST)
    a = p.parse_args()
    a.results.mkdir(parents=True, exist_ok=True)
    results = a.results.resolve()
    jobs = list(yaml.safe_load_all(a.manifest.read_text()))
    shards = next(j for j in jobs if j["spec"].get("completionMode") == "Indexed")
    merge = next(j for j in jobs if j is not shards)
    total = time.monotonic()
    for k in range(shards["spec"]["completions"]):
        code, secs = run_pod(a.engine, a.image, results, shards, {"JOB_COMPLETION_INDEX": k})
        print(f"shard pod {k}: exit {code}, {secs:.1f} s wall", flush=True)
        if code != 0:
            return 1
    code, secs = run_pod(a.engine, a.image, results, merge, {})
    print(f"merge pod: exit {code}, {secs:.1f} s wall")
    print(f"all pods: {time.monotonic() - total:.1f} s wall")
    if code != 0:
        return 1
    if a.reference is not None:
        out = merge_out(merge)
        host_out = results / out.relative_to("/results")
        same = same_report(host_out, out, a.reference.resolve())
        print("report.json: " + ("the same as the reference's" if same else "DIFFERENT"))
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
