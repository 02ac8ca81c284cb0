"""The configuration as the workflow sees it: found, merged and validated in one place.

The Snakefile and every `accelbench` command load the same default config,
merge the user's files over it the way Snakemake's --configfile does
(mappings key by key, lists replaced) and validate the result with the same
two checks: the JSON Schema (snakemake.utils.validate, which also fills in
the schema's defaults) and the registry check of kernel, backend and model
names. So a bad value gets the same message from `accelbench grid` as from
`snakemake`, and no command runs on a config the workflow would refuse.

The workflow's files are found from the installed package, not from the
working directory: a wheel carries them in accelbench/workflow/ (setup.py), an
editable install finds the checkout above it; the variable ACCELBENCH_WORKFLOW
names another checkout.

Before a file is parsed it is measured from its YAML events, without building
anything: a file whose values, once its aliases are expanded, exceed
MAX_NODES (an alias bomb: 400 bytes that stand for millions of values), or nest
deeper than MAX_DEPTH, or give a key twice in one mapping, is refused in one
line. Every error names the file that set the key (the last one merged that
has it), and no message is longer than MESSAGE_LIMIT.
"""

from __future__ import annotations

import collections
import copy
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from snakemake.utils import validate as validate_against_schema
from snakemake_interface_common.exceptions import WorkflowError

from accelbench import grid, registry
from accelbench.families import FAMILIES
from accelbench.families.base import Config
from accelbench.platform.devices import Device

WORKFLOW_ENV = "ACCELBENCH_WORKFLOW"
DEFAULT_CONFIG = Path("config") / "config.yaml"
SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"
# The default grid has 339 values, nested 6 deep, the cluster grid 574.
MAX_NODES = 20_000
MAX_DEPTH = 32
MESSAGE_LIMIT = 1_000
# Where a wheel carries the workflow, inside the package (setup.py puts it there).
PACKAGED_WORKFLOW = "workflow"

# A config file's mapping as YAML parsed it, or several merged: untyped until validated,
# and written to (merge, the schema's defaults, plugins.paths made absolute). Once
# validated it is read as accelbench.families.base.Config.
ConfigDocument = dict[str, Any]


class ConfigError(ValueError):
    """A config file that is missing or unreadable, or a config the workflow would refuse.

    The message is cut to MESSAGE_LIMIT characters: a value it quotes may be long.
    """

    def __init__(self, message: str):
        if len(message) > MESSAGE_LIMIT:
            left_out = len(message) - MESSAGE_LIMIT
            message = f"{message[:MESSAGE_LIMIT]}... ({left_out} more characters left out)"
        super().__init__(message)


def _is_workflow(folder: Path) -> bool:
    return (folder / "Snakefile").is_file() and (folder / DEFAULT_CONFIG).is_file()


def workflow_root() -> Path:
    """The folder holding the Snakefile, config/ and workflow/ of this package: the copy
    a wheel carries, else the checkout an editable install lives in."""
    named = os.environ.get(WORKFLOW_ENV)
    if named:
        if not _is_workflow(Path(named)):
            raise ConfigError(
                f"{WORKFLOW_ENV}={named} has no Snakefile and {DEFAULT_CONFIG}: "
                "point it at an accelbench checkout"
            )
        return Path(named)
    package = Path(__file__).resolve().parent
    for folder in [package / PACKAGED_WORKFLOW, *package.parents]:
        if _is_workflow(folder):
            return folder
    raise ConfigError(
        f"cannot find the accelbench workflow (Snakefile, {DEFAULT_CONFIG}) in "
        f"{package / PACKAGED_WORKFLOW} or above {package}; install the package from a "
        f"wheel or its checkout (pip install .) or set {WORKFLOW_ENV} to the checkout"
    )


def default_config_path() -> Path:
    return workflow_root() / DEFAULT_CONFIG


def merge(base: ConfigDocument, extra: ConfigDocument) -> ConfigDocument:
    """Merge `extra` into `base` as Snakemake merges config files; returns `base`."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def measure(text: str, source: str | os.PathLike[str]) -> None:
    """Refuse YAML that expands beyond MAX_NODES values, nests beyond MAX_DEPTH or repeats
    a key in one mapping, from its parser's events: nothing is built, no alias expanded."""
    open_nodes: list[_Open] = []
    expanded: dict[str, tuple[int, int]] = {}  # anchor -> (values, height)
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            line = event.start_mark.line + 1
            if isinstance(event, yaml.NodeEvent) and open_nodes:
                open_nodes[-1].child(event, source, line)
            if isinstance(event, yaml.CollectionStartEvent):
                open_nodes.append(_Open(event))
                values, height = 0, 0
            elif isinstance(event, yaml.CollectionEndEvent):
                closed = open_nodes.pop()
                values, height = closed.values, closed.height
                if closed.anchor:
                    expanded[closed.anchor] = (values, height)
            elif isinstance(event, yaml.AliasEvent):
                values, height = expanded.get(event.anchor, (1, 0))
            elif isinstance(event, yaml.ScalarEvent):
                values, height = 1, 0
                if event.anchor:
                    expanded[event.anchor] = (values, height)
            else:
                continue
            if open_nodes and not isinstance(event, yaml.CollectionStartEvent):
                open_nodes[-1].values += values
                open_nodes[-1].height = max(open_nodes[-1].height, height + 1)
            if len(open_nodes) + height > MAX_DEPTH:
                raise ConfigError(
                    f"config file {source} nests values more than {MAX_DEPTH} deep (line {line})"
                )
            if sum(node.values for node in open_nodes) > MAX_NODES:
                raise ConfigError(
                    f"config file {source} holds more than {MAX_NODES} values, its "
                    f"aliases expanded (line {line}); a config needs a few hundred"
                )
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {source} cannot be read: {err}") from None


class _Open:
    """A collection whose end the parser has not reached yet: what it holds so far."""

    def __init__(self, start: yaml.CollectionStartEvent):
        self.anchor = start.anchor
        self.values, self.height = 1, 0
        # A mapping's children alternate key, value; its scalar keys so far.
        self.keys: set[str] | None = set() if isinstance(start, yaml.MappingStartEvent) else None
        self.next_is_key = True

    def child(self, event: yaml.NodeEvent, source, line: int) -> None:
        """Note a child starting; refuse a key given twice."""
        if self.keys is None:
            return
        if self.next_is_key and isinstance(event, yaml.ScalarEvent):
            if event.value in self.keys:
                raise ConfigError(
                    f"config file {source}: key {event.value!r} is given twice in one mapping "
                    f"(line {line}); the second would silently replace the first"
                )
            self.keys.add(event.value)
        self.next_is_key = not self.next_is_key


def _read(path: Path) -> ConfigDocument:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"config file {path} cannot be read: {err}") from None
    measure(text, path)
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {path} cannot be read: {err}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"config file {path} must hold a mapping of keys, not a {type(loaded).__name__}"
        )
    return loaded


def check_configfiles(paths: Sequence[str | os.PathLike[str]]) -> None:
    """Refuse a result file given as a config file: a target that --configfile swallowed.

    `--configfile` takes every path after it up to the next option, so in
    `snakemake --configfile site.yaml results/.../n128.json` the record is read
    as configuration (and, when it does not exist, Snakemake stops with a
    FileNotFoundError before the workflow is read).
    """
    for path in map(Path, paths):
        if path.suffix == ".json" and "results" in path.parts:
            raise ConfigError(
                f"--configfile took the result {path} as a config file: --configfile reads "
                "every path after it, so a target written after it is swallowed. Write "
                "--configfile=config/mysite.yaml (one file per option), or name the "
                "targets before --configfile"
            )


def configfile_arguments(argv: Sequence[str]) -> list[str]:
    """The paths a Snakemake command line gives --configfile: every one after the option
    up to the next option (as Snakemake's parser takes them), and those after `=`."""
    paths: list[str] = []
    taking = False
    for arg in argv:
        option, equals, value = arg.partition("=")
        if option in ("--configfile", "--configfiles"):
            taking = not equals
            paths += [value] if equals else []
        elif arg.startswith("-"):
            taking = False
        elif taking:
            paths.append(arg)
    return paths


def check_snakemake_arguments(argv: Sequence[str]) -> None:
    """The checks of the Snakefile on a Snakemake command line, before Snakemake reads it:
    Snakemake opens every --configfile first and stops at a missing one with a traceback,
    such as a target's record not measured yet that --configfile took."""
    check_configfile_options(argv)
    check_configfiles(configfile_arguments(argv))


def check_configfile_options(argv: Sequence[str]) -> None:
    """Refuse --configfile given twice: Snakemake keeps only the files of the last one."""
    given = [arg for arg in argv if arg.split("=")[0] in ("--configfile", "--configfiles")]
    if len(given) > 1:
        raise ConfigError(
            f"--configfile is given {len(given)} times and Snakemake would read only the "
            "files of the last one: name them all after one option, targets before it "
            "(snakemake TARGETS --configfile config/a.yaml config/b.yaml)"
        )


def check_values(config: Config) -> None:
    """What the schema cannot say: the registry names and device strings of the grid, a
    host slowdown that is 0 or a factor of at least 1, and increasing bin edges of the
    queue-wait analysis. The error names the config key."""
    grid.validate_config(config)
    slowdown = (config.get("contention") or {}).get("max_host_slowdown", 0)
    if 0 < slowdown < 1:
        raise ConfigError(
            f"config key contention.max_host_slowdown: {slowdown} would call every run slowed;"
            " give 0 (no probe) or a factor of at least 1 (default 1.2)"
        )
    for key in ("cpu_hour_bins", "gb_hour_bins"):
        edges = config["cluster_analysis"][key]
        if any(high <= low for low, high in zip(edges, edges[1:], strict=False)):
            raise ConfigError(
                f"config key cluster_analysis.{key}: bin edges must increase, got {edges}"
            )


# The files merged into a config, in order, each with what it holds.
Sources = Sequence[tuple[Path, ConfigDocument]]
_NAMED_KEY = re.compile(r"^config key ([^\s:]+)")


def setting_file(keys: Sequence[Any], sources: Sources) -> str:
    """The file that set the value at `keys` (a key path; list indices end it): the last
    one merged that holds the longest part of it, else all of them."""
    best, found = -1, ""
    for path, loaded in sources:
        held, section = 0, loaded
        for key in keys:
            if not isinstance(key, str) or not isinstance(section, dict) or key not in section:
                break
            held, section = held + 1, section[key]
        if held >= best and held > 0:
            best, found = held, str(path)
    return found or " + ".join(str(path) for path, _ in sources)


def _schema_problem(error: jsonschema.ValidationError) -> tuple[list[Any], str]:
    """(key path, what is wrong) of a schema error, saying which value repeats. Of a value
    that several forms allow (oneOf: a list, or a mapping by device kind), the form its type
    chose tells what is wrong with it, not "valid under none of the given schemas"."""
    if error.validator in ("oneOf", "anyOf") and error.context:
        # A form whose own type the value does not have fails at its top: not the one meant.
        meant = [
            found for found in error.context if found.validator != "type" or found.relative_path
        ]
        return _schema_problem(jsonschema.exceptions.best_match(meant or error.context))
    keys = list(error.absolute_path)
    if error.validator == "uniqueItems":
        counts = collections.Counter(map(repr, error.instance))
        value, times = counts.most_common(1)[0]
        return keys, f"{value} is given {times} times; give each value once"
    return keys, error.message


def validate(
    config: ConfigDocument, sources: Sources = (), root: str | os.PathLike[str] | None = None
) -> None:
    """The workflow's checks: the schema of the workflow at `root` (filling in its defaults),
    then check_values; ConfigError names the file that set the wrong key (`sources`)."""
    schema = Path(root or workflow_root()) / SCHEMA
    if not schema.is_file():
        raise ConfigError(
            f"the workflow's config schema {schema} is missing: {schema.parents[2]} is not a "
            "whole accelbench checkout (Snakefile, config/, workflow/, src/)"
        )
    try:
        validate_against_schema(config, str(schema))
    except WorkflowError as err:  # Snakemake's, with jsonschema's error as its context
        if not isinstance(err.__context__, jsonschema.ValidationError):
            raise ConfigError(str(err)) from None
        keys, problem = _schema_problem(err.__context__)
        dotted = ".".join(map(str, keys)) or "(top level)"
        where = setting_file(keys, sources)
        raise ConfigError(f"{where}: config key {dotted}: {problem}") from None
    use_plugins(config, sources)
    try:
        check_values(config)
    except (grid.GridError, ConfigError) as err:
        named = _NAMED_KEY.match(str(err))
        keys = named[1].split(".") if named else []
        raise ConfigError(f"{setting_file(keys, sources)}: {err}") from None
    except registry.PluginError as err:  # it names the files at fault
        raise ConfigError(str(err)) from None


def use_plugins(config: ConfigDocument, sources: Sources = ()) -> None:
    """Hand the folders of plugins.paths to the registry, each made absolute in the config
    (which the jobs get): a relative one against the folder of the config file that names it,
    so that a config kept beside its units runs from any directory (the working directory,
    where no file names it). ConfigError names a path that is no folder of units."""
    named = [path for path, values in sources if "paths" in _section(values, "plugins")]
    base = named[-1].resolve().parent if named else Path.cwd()
    where = f"{named[-1]}: " if named else ""
    folders = []
    for given in config["plugins"]["paths"]:
        folder = (base / Path(given).expanduser()).resolve()
        if not folder.is_dir():
            raise ConfigError(f"{where}config key plugins.paths: {given} is no folder ({folder})")
        if not any((folder / kind).is_dir() for kind in registry.KINDS):
            raise ConfigError(
                f"{where}config key plugins.paths: {given} ({folder}) holds none of "
                f"{', '.join(kind + '/' for kind in registry.KINDS)}: name the folder above them"
            )
        folders.append(str(folder))
    config["plugins"]["paths"] = folders
    registry.use_plugins(folders)


def check_files(paths: Sequence[str | os.PathLike[str]]) -> Sources:
    """Each config file measured and read (its values by file, for the errors to name it)."""
    return [(Path(path), _read(Path(path))) for path in paths]


def where_set(key: str, configfiles: Sequence[str | os.PathLike[str]] = ()) -> str:
    """The file that set config key `key` (dotted) among the default config and
    `configfiles` (setting_file)."""
    return setting_file(key.split("."), check_files([default_config_path(), *configfiles]))


def check_loaded(
    config: ConfigDocument,
    paths: Sequence[str | os.PathLike[str]],
    root: str | os.PathLike[str],
) -> Sources:
    """The Snakefile's checks of the config Snakemake merged from `paths` (the default config
    first), for the workflow at `root`: each file measured and read again, then validate.
    Returns the files' values, for kept_defaults_warning."""
    sources = check_files(paths)
    validate(config, sources, root)
    return sources


def grid_names() -> list[tuple[str, str, str]]:
    """Where a config names the units of its grid (kernels, data science workloads, models),
    what each experiment calls the name and what the names are called: (config key,
    parameter, plural), as each family declares them (its `units_key`)."""
    return [
        (family.units_key, family.primary, family.units_called or family.units_key)
        for family in FAMILIES.values()
        if family.units_key and family.primary
    ]


def _section(values: ConfigDocument, dotted: str) -> ConfigDocument:
    for key in dotted.split("."):
        values = values.get(key) if isinstance(values, dict) else None
    return values if isinstance(values, dict) else {}


def kept_defaults(sources: Sources, expanded: grid.Grid) -> dict[str, list[str]]:
    """The default config's kernels, workloads and models that no later file names and
    the grid still measures, by config key.

    Config files merge key by key, so a site config made by copying the default
    and deleting lines keeps what it deleted; the first source is the default.
    """
    if len(sources) < 2:
        return {}
    (_, default), *site = sources
    kept = {}
    for key, part, _ in grid_names():
        named = set().union(*(_section(values, key) for _, values in site))
        measured = {getattr(exp, part) for exp in expanded.experiments if hasattr(exp, part)}
        left = [name for name in _section(default, key) if name not in named and name in measured]
        if left:
            kept[key] = left
    return kept


def kept_defaults_warning(sources: Sources, expanded: grid.Grid) -> str | None:
    """A warning naming kept_defaults, or None when every file names what it keeps."""
    kept = kept_defaults(sources, expanded)
    if not kept:
        return None
    plural = {key: what for key, _, what in grid_names()}
    listed = "; ".join(f"{plural[key]} {', '.join(names)} ({key})" for key, names in kept.items())
    files = " ".join(str(path) for path, _ in sources[1:])
    return (
        f"WARNING: the grid keeps {listed} from {sources[0][0]}, which {files} does not "
        "name: config files merge key by key. Give each one [] to leave it out (as "
        "config/site-example.yaml does), or name it to keep it."
    )


def load(configfiles: Sequence[str | os.PathLike[str]] = ()) -> ConfigDocument:
    """The default config with `configfiles` merged over it, validated as the workflow does."""
    return load_with_sources(configfiles)[0]


def load_with_sources(
    configfiles: Sequence[str | os.PathLike[str]] = (),
) -> tuple[ConfigDocument, Sources]:
    """load, and each file's own values (the default config's first)."""
    sources = check_files([default_config_path(), *configfiles])
    config: ConfigDocument = {}
    for _, loaded in sources:
        merge(config, copy.deepcopy(loaded))  # each source keeps its own values
    validate(config, sources)
    return config, sources


def partition(device: Device, config: Config) -> str:
    """The Slurm partition of `device`'s jobs; empty for a GPU on a site without one
    (accelbench.slurm.resources.site_problems names it)."""
    slurm = config["slurm"]
    return (slurm["gpu_partition"] or "") if device.is_gpu else slurm["cpu_partition"]
