"""Exit 0 when every requirement named is installed at a version it and
constraints.txt allow, else 1 (naming the first that is not). Arguments
ending in .txt are requirement files, others requirements ("pkg==1.*").

scripts/setup.sh runs pip only when this says something is missing: pip
resolving an already satisfied list costs 10-15 s of every test run.
Lines with options (-r, -c, --...) are skipped, requirements whose markers
this Python does not match too; one with extras counts as unmet (pip judges
what the extras pull in).
"""

import sys
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement


def requirements(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-"):
                yield Requirement(line)


def main(paths):
    constraints = {r.name.lower(): r for r in requirements("constraints.txt")}
    try:
        wanted = [r for p in paths for r in (requirements(p) if p.endswith(".txt") else [Requirement(p)])]
    except (OSError, InvalidRequirement) as e:
        print(f"requirements_met: {e}")
        return 1
    for req in wanted:
        if req.marker is not None and not req.marker.evaluate():
            continue
        if req.extras:
            print(f"requirements_met: {req} has extras")
            return 1
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            print(f"requirements_met: {req.name} is not installed")
            return 1
        for spec in (req, constraints.get(req.name.lower())):
            if spec is not None and not spec.specifier.contains(version, prereleases=True):
                print(f"requirements_met: {req.name} {version} is not {spec.specifier}")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
