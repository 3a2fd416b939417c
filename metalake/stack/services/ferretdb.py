"""FerretDB v1 with its SQLite backend: the MongoDB wire protocol, built from the Go module proxy."""

from __future__ import annotations

from metalake.stack.health import mongo_probe
from metalake.stack.services.base import Service, StackContext


class FerretDB(Service):
    name = "ferretdb"

    def ports(self, ctx: StackContext) -> list[int]:
        return [ctx.settings.stack.ports.ferretdb]

    def fetch(self, ctx: StackContext) -> None:
        ctx.run_fetch_script("ferretdb", self.name)

    def prepare(self, ctx: StackContext) -> None:
        ctx.run_dir(self.name).mkdir(parents=True, exist_ok=True)
        ctx.data_dir(self.name).mkdir(parents=True, exist_ok=True)

    def argv(self, ctx: StackContext) -> list[str]:
        return [
            str(ctx.cache_dir("ferretdb") / "ferretdb-run"),
            f"--listen-addr={ctx.host}:{ctx.settings.stack.ports.ferretdb}",
            # A directory URI: FerretDB keeps one SQLite file per database in it.
            f"--sqlite-url=file:{ctx.data_dir(self.name)}/",
        ]

    def probe(self, ctx: StackContext) -> str | None:
        return mongo_probe(ctx.settings.mongo_uri)
