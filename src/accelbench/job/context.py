"""What a job knows beyond its experiments' settings: the config it was planned under and
the folders of the user's units.

Neither is a setting of the experiment (a change in either measures nothing again): the
config's digest goes into each record's provenance, and every process that measures
loads the same catalogue (accelbench.registry.use_plugins).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class JobContext:
    config_hash: str
    plugins: tuple[str, ...] = ()

    @classmethod
    def of(cls, config_hash: str, plugins: Sequence[str] = ()) -> JobContext:
        return cls(config_hash, tuple(plugins))

    @classmethod
    def from_payload(cls, payload: Mapping[str, str | list[str]]) -> JobContext:
        """The context a supervisor handed its measuring process (as_payload)."""
        return cls.of(str(payload["config_hash"]), payload["plugins"])

    def as_payload(self) -> dict[str, str | list[str]]:
        return {"config_hash": self.config_hash, "plugins": list(self.plugins)}
