"""Print the distributions in this interpreter's environment whose files are missing (one name a line).

`make venv` runs it after `uv sync --locked`: uv trusts an installed package's metadata (dist-info), so a
package whose files were deleted behind its back stays broken; make reinstalls what this prints. Only
each distribution's top-level files (`pkg/__init__.py`, `module.py`, ...) are checked, which finds a
removed package in well under a second even for the cloud SDKs' tens of thousands of files.
With --strict, exit 1 if anything is missing (after the repair). Standard library only.
"""
from __future__ import annotations

import sys
from importlib import metadata


def broken_distributions() -> list[str]:
    out = []
    for dist in metadata.distributions():
        files = [f for f in (dist.files or []) if len(f.parts) <= 2 and f.suffix == ".py"]
        if any(not f.locate().exists() for f in files):
            out.append(dist.metadata["Name"])
    return sorted(set(out))


def main(argv: list[str]) -> int:
    broken = broken_distributions()
    for name in broken:
        print(name)
    return 1 if broken and "--strict" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
