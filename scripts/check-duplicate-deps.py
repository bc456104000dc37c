#!/usr/bin/env python3
"""Fails when a workspace crate depends directly on an older version of a
crate that the build also holds in a newer one.

Two versions of one crate cost build time and binary size. When the older
one is our own direct dependency, moving ours up is cheap (and keeps it at
the current major), so that case fails; a duplicate that only our
dependencies bring in (e.g. `syn` 2 beside 3 through proc macros, or an
older one beside ours) is listed as a note and allowed, since avoiding it
means waiting for them.

Run from the repository root: `python3 scripts/check-duplicate-deps.py`
(CI runs it). Counts normal and build dependencies for the host target.
"""
import collections
import json
import subprocess
import sys


def semver(version: str) -> tuple:
    """Orders release versions; a pre-release tag sorts below its release."""
    core, _, pre = version.partition("+")[0].partition("-")
    return tuple(int(x) for x in core.split(".")) + ((0, pre) if pre else (1, ""),)


def main() -> int:
    meta = json.loads(
        subprocess.run(
            [
                "cargo", "metadata", "--locked", "--format-version", "1",
                "--filter-platform", "x86_64-unknown-linux-gnu",
            ],
            check=True, capture_output=True, text=True,
        ).stdout
    )
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    members = set(meta["workspace_members"])

    def built_deps(node):
        for dep in node["deps"]:
            if any(k["kind"] in (None, "build") for k in dep["dep_kinds"]):
                yield dep["pkg"]

    # Everything the workspace's crates build (tests and benches left out).
    reached, stack = set(), list(members)
    while stack:
        pid = stack.pop()
        if pid in reached:
            continue
        reached.add(pid)
        stack.extend(built_deps(nodes[pid]))

    versions = collections.defaultdict(set)
    for pid in reached:
        if pid not in members:
            versions[packages[pid]["name"]].add(packages[pid]["version"])

    failures, notes = [], []
    for member in sorted(members, key=lambda m: packages[m]["name"]):
        for dep in built_deps(nodes[member]):
            name, version = packages[dep]["name"], packages[dep]["version"]
            newer = {v for v in versions[name] if semver(v) > semver(version)}
            if dep not in members and newer:
                failures.append(
                    f"{packages[member]['name']} depends on {name} {version}, "
                    f"while the build also holds {name} {', '.join(sorted(newer))}: "
                    f"move {packages[member]['name']}'s {name} up"
                )
    for name, vs in sorted(versions.items()):
        if len(vs) > 1:
            notes.append(f"{name}: {', '.join(sorted(vs))}")

    if notes:
        print("crates built in more than one version (brought in by dependencies):")
        for note in notes:
            print(f"  {note}")
    if failures:
        print("duplicates a workspace crate could avoid:", file=sys.stderr)
        for failure in failures:
            print(f"  {failure}", file=sys.stderr)
        return 1
    print("no duplicate is one of our own direct dependencies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
