"""Where units come from: the package, the user's folders and installed packages, one
catalogue per kind that every process that sets the same folders sees alike."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from accelbench import registry
from accelbench.datasci import workloads
from accelbench.kernels import kernels
from accelbench.train.models import MODELS, models

import plugin_folders


@pytest.fixture
def folder(tmp_path):
    """A plugin folder of the test's own; the catalogues hold only the built-ins after it."""
    yield tmp_path / "my_benchmarks"
    registry.use_plugins([])


def test_a_kernel_in_a_plugin_folder_joins_the_built_ins_with_its_origin_and_digest(folder):
    file = plugin_folders.kernel(folder, "twice")
    registry.use_plugins([folder])
    unit = registry.units("kernels")["twice"]
    assert kernels()["twice"] is unit.spec
    assert "saxpy" in kernels()
    assert unit.origin == str(folder.resolve())
    assert unit.files == (str(file.resolve()),)
    assert unit.module.startswith(f"{registry.PLUGIN_PACKAGE}.my_benchmarks_")
    assert unit.module.endswith(".kernels.twice")
    assert unit.spec.implementations["numpy"].__module__ == unit.module
    assert len(unit.digest) == 16 and not unit.builtin


def test_built_in_units_name_their_file_in_the_package_and_carry_no_digest_setting():
    unit = registry.units("kernels")["saxpy"]
    assert unit.builtin and unit.origin == registry.BUILTIN
    assert unit.files == ("accelbench/kernels/saxpy.py",)
    assert registry.source_digest("kernels", "saxpy") == {}
    resnet = registry.units("models")["resnet50"]
    assert resnet.files == ("accelbench/train/models/resnet.py",)
    assert resnet.spec is MODELS["resnet50"]


def test_an_edited_unit_has_another_digest_and_its_settings_say_so(folder):
    file = plugin_folders.kernel(folder, "twice")
    registry.use_plugins([folder])
    before = registry.source_digest("kernels", "twice")
    file.write_text(file.read_text() + "\n# edited\n")
    registry.use_plugins([])
    registry.use_plugins([folder])
    after = registry.source_digest("kernels", "twice")
    assert set(before) == set(after) == {"source_digest"}
    assert before != after


def test_the_catalogue_is_made_once_until_the_folders_change(folder, tmp_path):
    plugin_folders.kernel(folder, "twice")
    registry.use_plugins([folder])
    first = kernels()
    registry.use_plugins([str(folder / ".." / folder.name)])  # the same folder
    assert kernels() is first
    registry.use_plugins([])
    assert "twice" not in kernels()


def test_a_workload_and_a_model_in_a_plugin_folder_join_their_catalogues(folder):
    plugin_folders.workload(folder, "clip")
    plugin_folders.model(folder, "linear")
    registry.use_plugins([folder])
    assert workloads()["clip"].implementations["pandas"].__module__.endswith(".datasci.clip")
    spec = models()["linear"]
    assert spec.module_name.endswith(".models.linear")
    assert spec.build(spec.options).out_features == 2  # the network from its own module
    assert "resnet18" in models()


def test_modules_of_a_plugin_folder_import_each_other_relatively(folder):
    (folder / "shared.py").parent.mkdir(parents=True)
    (folder / "shared.py").write_text("FACTOR = 2\n")
    source = plugin_folders.KERNEL.format(name="twice", run="np.multiply(x, 2, out=out)", fetch="")
    source = source.replace("fetch=lambda: ,", "fetch=lambda: out * FACTOR / 2,")
    plugin_folders.write_unit(folder, "kernels", "twice", "from ..shared import FACTOR\n" + source)
    registry.use_plugins([folder])
    assert "twice" in kernels()


def test_two_folders_of_one_name_stay_apart(tmp_path):
    first, second = tmp_path / "a" / "units", tmp_path / "b" / "units"
    plugin_folders.kernel(first, "one")
    plugin_folders.kernel(second, "two")
    try:
        registry.use_plugins([first, second])
        modules = {registry.units("kernels")[name].module for name in ("one", "two")}
    finally:
        registry.use_plugins([])
    assert len({module.rsplit(".", 2)[0] for module in modules}) == 2


def test_a_name_a_built_in_has_is_refused_naming_both_files(folder):
    file = plugin_folders.kernel(folder, "saxpy")
    registry.use_plugins([folder])
    with pytest.raises(registry.PluginError) as refused:
        kernels()
    message = str(refused.value)
    assert "kernel 'saxpy' is declared twice" in message
    assert "accelbench/kernels/saxpy.py (builtin)" in message
    assert f"{file.resolve()} ({folder.resolve()})" in message


def test_a_name_two_plugin_folders_declare_is_refused_naming_both_files(tmp_path):
    first = plugin_folders.model(tmp_path / "a", "linear")
    second = plugin_folders.model(tmp_path / "b", "linear")
    try:
        registry.use_plugins([tmp_path / "a", tmp_path / "b"])
        with pytest.raises(registry.PluginError) as refused:
            models()
    finally:
        registry.use_plugins([])
    assert str(first.resolve()) in str(refused.value)
    assert str(second.resolve()) in str(refused.value)


@pytest.mark.parametrize("name", ["a/b", "two words", "", "-dash", "{x}", "star*", "x" * 65])
def test_a_name_that_cannot_be_one_part_of_a_result_path_is_refused_naming_the_rule(folder, name):
    file = plugin_folders.write_unit(
        folder, "kernels", "named", plugin_folders.KERNEL.format(name=name, run="pass", fetch="out")
    )
    registry.use_plugins([folder])
    with pytest.raises(registry.PluginError) as refused:
        kernels()
    assert str(refused.value) == (
        f"{file.resolve()}: kernel name {name!r} cannot be one part of a result path: "
        f"a name is {registry.NAME_RULE_TEXT}"
    )


def test_every_built_in_name_keeps_the_rule():
    for kind in registry.KINDS:
        for name in registry.units(kind):
            assert registry.NAME_RULE.fullmatch(name), name


def test_a_module_that_fails_to_import_is_named_with_its_line(folder):
    file = plugin_folders.write_unit(folder, "kernels", "broken", "import os\nimport nowhere\n")
    registry.use_plugins([folder])
    with pytest.raises(registry.PluginError) as refused:
        kernels()
    assert str(refused.value) == (
        f"{file.resolve()}, line 2: cannot be imported: ModuleNotFoundError: "
        "No module named 'nowhere'"
    )


def test_a_module_with_a_syntax_error_is_named_with_its_line(folder):
    file = plugin_folders.write_unit(folder, "datasci", "typo", "x = 1\ndef f(:\n")
    registry.use_plugins([folder])
    with pytest.raises(registry.PluginError) as refused:
        workloads()
    assert str(refused.value).startswith(f"{file.resolve()}, line 2: cannot be imported:")


def test_a_spec_of_another_kind_is_refused_naming_its_file(folder):
    file = plugin_folders.kernel(folder / "tmp", "twice")
    plugin_folders.write_unit(folder, "datasci", "twice", file.read_text())
    registry.use_plugins([folder])
    with pytest.raises(registry.PluginError, match="SPEC is a KernelSpec, not a WorkloadSpec"):
        workloads()


def test_a_missing_plugin_folder_is_named(tmp_path):
    registry.use_plugins([tmp_path / "nowhere"])
    try:
        with pytest.raises(registry.PluginError, match="plugin folder .*nowhere does not exist"):
            kernels()
    finally:
        registry.use_plugins([])


def test_an_installed_package_registers_units_through_its_entry_points(tmp_path):
    """A distribution on sys.path with entry points in groups accelbench.kernels and
    accelbench.models: one names a module, the other a spec; each unit names the distribution."""
    site = tmp_path / "site"
    plugin_folders.kernel(site / "mybench", "thrice")
    plugin_folders.model(site / "mybench", "tiny")
    (site / "mybench" / "__init__.py").write_text("")
    for part in ("kernels", "models"):
        (site / "mybench" / part / "__init__.py").write_text("")
    info = site / "mybench-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mybench\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [accelbench.kernels]
            thrice = mybench.kernels.thrice
            [accelbench.models]
            tiny = mybench.models.tiny:SPEC
            """
        )
    )
    script = textwrap.dedent(
        f"""\
        import sys
        sys.path.insert(0, {str(site)!r})
        from accelbench import registry
        kernel, model = registry.units("kernels")["thrice"], registry.units("models")["tiny"]
        print(kernel.origin)
        print(kernel.files[0])
        print(model.origin)
        print(model.spec.module_name, model.spec.build({{}}).in_features)
        """
    )
    shown = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert shown == [
        "entry point thrice = mybench.kernels.thrice of mybench 1.2",
        str(site / "mybench" / "kernels" / "thrice.py"),
        "entry point tiny = mybench.models.tiny:SPEC of mybench 1.2",
        "mybench.models.tiny 4",
    ]


def test_the_model_catalogue_imports_no_torch_without_models_of_the_users():
    script = (
        "import sys\nfrom accelbench.train.models import models\n"
        "assert 'resnet18' in models()\nprint('torch' in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert shown.strip() == "False"
