"""Each family's settings are one typed object: built from the rule's params, given back as
the same params, refusing a key its type does not have."""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, fields, replace

import pytest
import yaml

from accelbench import config as workflow_config
from accelbench import grid
from accelbench.families import FAMILIES
from accelbench.families.kernel import KernelSettings
from accelbench.measuring import energy
from accelbench.measuring.settings import (
    ContentionSettings,
    EnergySettings,
    SettingsError,
    TimedSettings,
)


def default(field):
    return field.default if field.default_factory is MISSING else field.default_factory()


@pytest.mark.parametrize("configfiles", [[], ["config/gpu.yaml"]])
def test_every_planned_experiments_settings_come_back_from_their_params(configfiles):
    """What a job reads back from its rule's params (a JSON document) is what the family
    declared; and so is a run's that takes no energy window."""
    config = workflow_config.load([workflow_config.workflow_root() / path for path in configfiles])
    for exp in grid.expand(config).experiments:
        family = FAMILIES[exp.family]
        settings = family.settings(config, {k: str(v) for k, v in asdict(exp).items()})
        assert isinstance(settings, family.settings_type)
        params = json.loads(json.dumps(settings.as_params()))
        assert list(params) == [key for key in settings.PARAMS if key in params]
        assert family.settings_type.from_params(params) == settings, exp.id
        off = energy.without_window(settings)
        assert family.settings_type.from_params(off.as_params()) == off


def test_an_unknown_key_is_refused_naming_it_and_the_allowed_ones():
    with pytest.raises(SettingsError) as refused:
        KernelSettings.from_params({"seed": 0, "config_hash": "x"})
    assert str(refused.value).startswith("unknown KernelSettings key 'config_hash'; allowed: ")
    assert "naive_size_limit, source_digest" in str(refused.value)
    with pytest.raises(SettingsError, match="unknown ContentionSettings key 'patience'"):
        TimedSettings.from_params({"contention": {"patience": 3}})
    with pytest.raises(SettingsError, match="unknown EnergySettings key 'joules'"):
        TimedSettings.from_params({"energy": {"joules": 1}})


def test_a_unit_of_the_users_digest_is_in_the_params_only_where_it_has_one():
    assert "source_digest" not in KernelSettings().as_params()
    assert KernelSettings(source_digest="abc").as_params()["source_digest"] == "abc"


def test_what_a_later_run_sets_travels_with_the_params():
    later = replace(KernelSettings(max_call_s=2.0), max_call_s=None)
    assert later.as_params()["max_call_s"] is None
    assert KernelSettings.from_params(later.as_params()) == later


def test_the_contention_and_energy_defaults_are_the_configs():
    schema = yaml.safe_load((workflow_config.workflow_root() / workflow_config.SCHEMA).read_text())
    for kind, section in ((ContentionSettings, "contention"), (EnergySettings, "energy")):
        given = schema["properties"][section]["properties"]
        declared = {field.name: default(field) for field in fields(kind) if field.name in given}
        assert declared == {key: entry["default"] for key, entry in given.items()}
        assert set(given) <= {field.name for field in fields(kind)}


def test_a_device_kind_the_energy_section_leaves_out_takes_its_default():
    settings = EnergySettings(min_window_s={"cuda": 2.0})
    assert (settings.min_window_for("cuda"), settings.min_window_for("cpu")) == (2.0, 0.2)
    assert settings.as_params()["min_window_s"] == {"cuda": 2.0}
