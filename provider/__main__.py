"""The package's provider: hosts the components of components/package.py for other Pulumi languages.

The Pulumi CLI runs this file (PulumiPlugin.yaml `main`) when a program that ran `pulumi package add`
needs the package; the schema it serves is the one `multinode schema` prints. Installed from the wheel, the same
provider is the `pulumi-resource-multinode` executable (multinode/entry_points.py), found on PATH by any engine.
"""
import sys
from pathlib import Path

# The repository root (multinode/, components/) on the path whichever directory the CLI starts us in.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from multinode.package_schema import host  # noqa: E402

if __name__ == "__main__":
    host(sys.argv[1:])
