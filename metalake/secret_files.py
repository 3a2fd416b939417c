"""Secret settings read from files: ``METALAKE_<SETTING>_FILE`` names a file that holds the value of a secret setting
(Compose secrets under ``/run/secrets``, Kubernetes Secrets mounted as volumes), so a secret never has to be an
environment variable a process listing or a crash dump can show.

Only secret settings (``SecretStr``, alone or in a list or dict) take a ``_FILE`` twin: ``METALAKE_TRINO__CA_FILE``
and ``METALAKE_ACCESS__RULES_FILE`` stay paths. The variable itself wins over its file; one trailing line break is
dropped (editors and ``echo`` add one). A dict or list setting's file holds JSON, as its variable would.
"""

from __future__ import annotations

import os
import types
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic_settings import EnvSettingsSource

SUFFIX = "_FILE"


class SecretFileError(RuntimeError):
    """A ``_FILE`` variable names a file that cannot be read (named by its variable, never its content)."""


def secret_variables(model: type[BaseModel], prefix: str = "METALAKE_", delimiter: str = "__") -> set[str]:
    """The environment variables (upper case) of every secret setting of ``model`` and its nested models."""
    out: set[str] = set()
    for name, field in model.model_fields.items():
        variable = f"{prefix}{name.upper()}"
        if _holds_secret(field.annotation):
            out.add(variable)
        for nested in _models_in(field.annotation):
            out |= secret_variables(nested, variable + delimiter, delimiter)
    return out


def _arguments(annotation: Any) -> Iterator[Any]:  # noqa: ANN401
    """``annotation`` and every type argument inside it (``dict[str, SecretStr] | None`` -> ..., ``SecretStr``)."""
    yield annotation
    for argument in get_args(annotation):
        yield from _arguments(argument)


def _holds_secret(annotation: Any) -> bool:  # noqa: ANN401
    return any(argument is SecretStr for argument in _arguments(annotation))


def _models_in(annotation: Any) -> list[type[BaseModel]]:  # noqa: ANN401
    """The models a field nests directly (``Model`` or ``Model | None``), not those inside lists or dicts."""
    candidates = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    return [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]


def read_secret_files(environ: Mapping[str, str], variables: set[str]) -> dict[str, str]:
    """``{variable: content}`` for every ``<variable>_FILE`` of ``environ`` whose variable is a secret setting and
    is not set itself (matched case-insensitively, as the settings match variables)."""
    wanted = {v.upper() for v in variables}
    present = {k.upper() for k, v in environ.items() if v}
    out: dict[str, str] = {}
    for key, path in environ.items():
        upper = key.upper()
        if not upper.endswith(SUFFIX) or not path:
            continue
        variable = upper.removesuffix(SUFFIX)
        if variable not in wanted or variable in present:
            continue
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise SecretFileError(f"settings: {key} names a file that cannot be read ({type(exc).__name__})") from None
        out[variable] = text.removesuffix("\n").removesuffix("\r")
    return out


class SecretFilesSource(EnvSettingsSource):
    """The settings source of the ``_FILE`` variables: read like the environment, after it."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        files = read_secret_files(os.environ, secret_variables(self.settings_cls))
        return {k if self.case_sensitive else k.lower(): v for k, v in files.items()}
