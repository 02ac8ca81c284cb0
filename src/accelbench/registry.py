"""Where benchmark units come from: this package, the user's folders and installed packages.

A unit (a kernel, a data science workload, a model) is declared by a module: `SPEC`, or
`SPECS` where one module declares closely related units that share their code (the
transfer directions). A catalogue holds the units of one kind from three sources, in
this order:

- this package: each module of accelbench.kernels and accelbench.datasci, and the model
  catalogue (accelbench.train.models.MODELS, which imports no torch);
- the folders named by use_plugins (the config's `plugins.paths`), each holding
  `kernels/`, `datasci/` and `models/` of such modules. A folder need not be on sys.path:
  it is imported as the package accelbench_plugins.<its name>_<hash of its path>, so its
  modules may import each other relatively and two folders of one name stay apart;
- the entry points of installed packages (groups accelbench.kernels, accelbench.datasci,
  accelbench.models), each naming a module that declares units, or a spec itself.

A catalogue is made once per process, when it is first asked for, in a fixed order
(sources as above, modules by name), so every process that set the same folders sees the
same catalogue. A unit whose name another has taken, or that cannot be one part of a
result path, is refused naming the files; a module that fails to import, naming its file.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import pkgutil
import re
import sys
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypedDict

BUILTIN = "builtin"
# The package every plugin folder is imported below.
PLUGIN_PACKAGE = "accelbench_plugins"
# A unit's name is one part of its result path, a wildcard of Snakemake's, a word in a
# log line and a Slurm job's comment: no separator, space, quote, glob or brace.
NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
NAME_RULE_TEXT = (
    "letters, digits and . _ + -, starting with a letter or digit, at most 64 characters"
)


class PluginError(ValueError):
    """A unit that cannot join its catalogue; the message names the file(s)."""


@dataclass(frozen=True)
class Kind:
    """One kind of unit: its catalogue's name (also the folder in a plugin folder), what one
    is called, the package of the built-in ones, the spec class and the entry-point group.

    `listed` names the package's own catalogue where its modules declare nothing (the
    models: their modules import torch, their catalogue does not); such a spec names the
    module with its code as `module_name`. `not_units` are the package's modules that
    declare no unit (the family's measuring code): the catalogue does not import them, so
    that reading it (every parse of the Snakefile) stays light.
    """

    name: str
    what: str
    package: str
    spec_class: str
    group: str
    listed: str | None = None
    not_units: tuple[str, ...] = ()


KINDS = {
    kind.name: kind
    for kind in (
        Kind(
            "kernels",
            "kernel",
            "accelbench.kernels",
            "KernelSpec",
            "accelbench.kernels",
            not_units=("measure",),
        ),
        Kind(
            "datasci",
            "workload",
            "accelbench.datasci",
            "WorkloadSpec",
            "accelbench.datasci",
            not_units=("measure",),
        ),
        Kind(
            "models",
            "model",
            "accelbench.train.models",
            "ModelSpec",
            "accelbench.models",
            listed="MODELS",
        ),
    )
}


class UnitSection(TypedDict):
    """A record's `unit` section: where the unit measured comes from, and its source."""

    origin: str
    files: list[str]
    digest: str


@dataclass(frozen=True)
class Unit:
    """A unit in its catalogue: its spec, where it comes from and what its source is."""

    spec: Any
    module: str  # the module with its code
    files: tuple[str, ...]  # its source: package-relative for a built-in, else absolute
    origin: str  # BUILTIN, the plugin folder, or the entry point and its distribution
    digest: str  # of the source files: an edited unit is measured again

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def file(self) -> str:
        return self.files[0]

    @property
    def builtin(self) -> bool:
        return self.origin == BUILTIN

    def as_record(self) -> UnitSection:
        """The record's `unit` section."""
        return UnitSection(origin=self.origin, files=list(self.files), digest=self.digest)


_folders: tuple[Path, ...] = ()


def use_plugins(folders: Iterable[str | os.PathLike[str]]) -> None:
    """Have this process's catalogues hold the units of `folders` beside the built-ins and the
    entry points' (made anew on the next question where the folders changed)."""
    global _folders
    resolved = tuple(dict.fromkeys(Path(folder).resolve() for folder in folders))
    if resolved != _folders:
        _folders = resolved
        units.cache_clear()
        specs.cache_clear()


def plugin_folders() -> list[str]:
    """The folders this process's catalogues hold the units of (use_plugins)."""
    return [str(folder) for folder in _folders]


@functools.cache
def specs(kind: str) -> dict[str, Any]:
    """name -> spec of every unit of `kind` ("kernels", "datasci" or "models"), by name."""
    return {name: unit.spec for name, unit in units(kind).items()}


@functools.cache
def units(kind: str) -> dict[str, Unit]:
    """name -> Unit of every unit of `kind`, by name; PluginError names a unit that cannot
    join (its name taken or not a path part) or a module that cannot be imported."""
    found: dict[str, Unit] = {}
    for unit in _discovered(KINDS[kind]):
        _check_name(KINDS[kind], unit)
        if unit.name in found:
            first = found[unit.name]
            raise PluginError(
                f"{KINDS[kind].what} {unit.name!r} is declared twice: in {first.file} "
                f"({first.origin}) and in {unit.file} ({unit.origin}); a result path names "
                f"a {KINDS[kind].what} by its name alone, so rename one"
            )
        found[unit.name] = unit
    return dict(sorted(found.items()))


def source_digest(kind: str, name: str) -> dict[str, str]:
    """{"source_digest": ...} for a unit of the user's, {} for a built-in: what its
    experiments' settings carry, so that an edit measures them again. A built-in is
    versioned with the package (its records name the commit), and were its digest in the
    settings, every record measured before it was would be measured again."""
    unit = units(kind)[name]
    return {} if unit.builtin else {"source_digest": unit.digest}


def _check_name(kind: Kind, unit: Unit) -> None:
    name = unit.spec.name
    if not isinstance(name, str) or not NAME_RULE.fullmatch(name):
        raise PluginError(
            f"{unit.file}: {kind.what} name {name!r} cannot be one part of a result path: "
            f"a name is {NAME_RULE_TEXT}"
        )


def _discovered(kind: Kind) -> Iterator[Unit]:
    yield from _builtin(kind)
    for folder in _folders:
        yield from _in_folder(kind, folder)
    yield from _from_entry_points(kind)


def _builtin(kind: Kind) -> Iterator[Unit]:
    package = importlib.import_module(kind.package)
    root = Path(package.__file__).parents[kind.package.count(".") + 1]

    def builtin_unit(spec: Any, module: str) -> Unit:
        file = Path(importlib.util.find_spec(module).origin)
        return _unit(spec, module, [file], BUILTIN, shown=[file.relative_to(root)])

    if kind.listed:
        for spec in getattr(package, kind.listed).values():
            yield builtin_unit(spec, spec.module_name)
        return
    for info in pkgutil.iter_modules(package.__path__):
        if info.name in kind.not_units:
            continue
        module = importlib.import_module(f"{kind.package}.{info.name}")
        for spec in _declared(kind, module, module.__file__):
            yield builtin_unit(spec, module.__name__)


def _folder_package(folder: Path) -> str:
    """The package a plugin folder is imported as (made here): named after the folder and a
    hash of its path."""
    hashed = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
    package = f"{PLUGIN_PACKAGE}.{re.sub(r'[^A-Za-z0-9_]', '_', folder.name)}_{hashed}"
    for name, path in ((PLUGIN_PACKAGE, []), (package, [str(folder)])):
        if name not in sys.modules:
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = path
            sys.modules[name] = importlib.util.module_from_spec(spec)
    return package


def _in_folder(kind: Kind, folder: Path) -> Iterator[Unit]:
    if not folder.is_dir():
        raise PluginError(f"plugin folder {folder} does not exist")
    holder = folder / kind.name
    if not holder.is_dir():
        return
    package = f"{_folder_package(folder)}.{kind.name}"
    _imported(package, str(holder))
    for info in sorted(pkgutil.iter_modules([str(holder)]), key=lambda info: info.name):
        name = f"{package}.{info.name}"
        file = holder / info.name / "__init__.py" if info.ispkg else holder / f"{info.name}.py"
        module = _imported(name, str(file))
        for spec in _declared(kind, module, file):
            yield _unit(_with_module(spec, name), name, [file], str(folder))


def _from_entry_points(kind: Kind) -> Iterator[Unit]:
    points = importlib.metadata.entry_points(group=kind.group)
    for point in sorted(points, key=lambda point: (point.name, point.value)):
        module = _imported(point.module, f"{point.module} (entry point {point.name})")
        file = Path(module.__file__)
        dist = f" of {point.dist.name} {point.dist.version}" if point.dist else ""
        origin = f"entry point {point.name} = {point.value}{dist}"
        loaded = module if point.attr is None else getattr(module, point.attr)
        declared = (
            _declared(kind, loaded, file)
            if isinstance(loaded, ModuleType)
            else [_checked_spec(kind, loaded, file, f"entry point {point.value}")]
        )
        for spec in declared:
            yield _unit(_with_module(spec, module.__name__), module.__name__, [file], origin)


def _imported(name: str, where: str) -> ModuleType:
    """Import module `name`; PluginError names `where` it is (its file) and the line of that
    file where the import failed."""
    try:
        return importlib.import_module(name)
    except Exception as err:
        lines = [
            frame.lineno
            for frame in traceback.extract_tb(err.__traceback__)
            if frame.filename == where
        ]
        if isinstance(err, SyntaxError):  # in this file, or in one it imports
            where, lines = err.filename or where, [err.lineno]
        where = f"{where}, line {lines[-1]}" if lines and lines[-1] else where
        raise PluginError(f"{where}: cannot be imported: {type(err).__name__}: {err}") from err


def _declared(kind: Kind, module: Any, file: str | os.PathLike[str]) -> list[Any]:
    """The specs a module declares (SPECS, then SPEC), each of the kind's spec class."""
    single = getattr(module, "SPEC", None)
    declared = [*getattr(module, "SPECS", ()), *([single] if single is not None else [])]
    return [_checked_spec(kind, spec, file, "SPEC") for spec in declared]


def _checked_spec(kind: Kind, spec: Any, file: str | os.PathLike[str], what: str) -> Any:
    wanted = getattr(importlib.import_module(kind.package), kind.spec_class)
    if not isinstance(spec, wanted):
        raise PluginError(
            f"{file}: {what} is a {type(spec).__name__}, not a {kind.spec_class}: a module "
            f"in {kind.name}/ declares {kind.what}s"
        )
    return spec


def _with_module(spec: Any, module: str) -> Any:
    """A spec that names the module with its code (a model's `module`), where it leaves it
    out, gets the module that declares it."""
    if any(field.name == "module" for field in dataclasses.fields(spec)) and spec.module is None:
        return dataclasses.replace(spec, module=module)
    return spec


def _unit(
    spec: Any,
    module: str,
    files: list[Path],
    origin: str,
    shown: list[Path] | None = None,
) -> Unit:
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.read_bytes())
    return Unit(spec, module, tuple(map(str, shown or files)), origin, digest.hexdigest()[:16])
