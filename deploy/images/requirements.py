"""Writes one pip requirements file per extra of pyproject.toml (core.txt: the core dependencies) into a folder, so
each image installs exactly its extra from the wheelhouse (deploy/images/Containerfile)."""

import sys
import tomllib
from pathlib import Path

EXTRAS = ("spark", "api", "connectors", "outbound")


def main(pyproject: Path, out: Path) -> None:
    project = tomllib.loads(pyproject.read_text())["project"]
    (out / "core.txt").write_text("\n".join(project["dependencies"]) + "\n")
    for extra in EXTRAS:
        # An extra's own lines only: the core is in the image below it already.
        (out / f"{extra}.txt").write_text("\n".join(project["optional-dependencies"][extra]) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
