"""Print pins of every dependency at its newest release *before* the newest
that pyproject.toml allows (PyYAML 6.0.3 beside 6.0.4), one per line, for
`pip install -c`: .ci/run tests these too, so that a behaviour that changed
between two releases is caught the day the new one appears.

A dependency whose range allows a single release is pinned to it. Versions
come from the package index pip uses (`pip index versions`); pre-releases
and yanked releases are skipped as pip skips them. Needs `packaging`
(pytest's own dependency).
"""

from __future__ import annotations

import re
import subprocess
import sys

import tomllib
from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version


def available(name: str) -> list[Version]:
    """The releases of ``name`` the index has, newest first."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", name], capture_output=True, text=True, check=True
    ).stdout
    line = next(line for line in listing.splitlines() if line.startswith("Available versions:"))
    versions = []
    for text in re.split(r",\s*", line.split(":", 1)[1].strip()):
        try:
            versions.append(Version(text))
        except InvalidVersion:
            continue
    return sorted((v for v in versions if not v.is_prerelease), reverse=True)


def main() -> None:
    project = tomllib.load(open("pyproject.toml", "rb"))["project"]
    specs = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    seen = set()
    for spec in specs:
        requirement = Requirement(spec)
        if requirement.name in seen:
            continue
        seen.add(requirement.name)
        allowed = [v for v in available(requirement.name) if requirement.specifier.contains(v)]
        if allowed:
            print(f"{requirement.name}=={allowed[1] if len(allowed) > 1 else allowed[0]}")


if __name__ == "__main__":
    main()
