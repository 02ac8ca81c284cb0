"""What a run without profiles/default lacks, and how it is said."""

from accelbench.run import profile as run_profile

PROFILE = {
    "resources": ["benchmark_slots", "_cores", "_nodes"],
    "group_components": {"kernels_{device}": 25},
    "keep_going": True,
}


def test_the_project_profile_lacks_nothing_anywhere():
    for executor in ("local", "slurm"):
        assert run_profile.missing_settings(executor=executor, **PROFILE) == []
    assert run_profile.warning([]) == ""


def test_a_slurm_run_without_the_profile_names_every_missing_setting():
    missing = run_profile.missing_settings(
        executor="slurm", resources=["_cores", "_nodes"], group_components={}, keep_going=False
    )
    assert [item.split(":")[0] for item in missing] == [
        "resources benchmark_slots=1",
        "group-components kernels_{device}=25",
        "keep-going",
    ]
    assert "a Slurm submission of its own" in missing[1]
    banner = run_profile.warning(missing)
    assert banner.splitlines()[1].startswith("WARNING: this run does not use")
    assert "--workflow-profile" in banner


def test_groups_matter_only_to_slurm():
    lone = {**PROFILE, "group_components": {}}
    assert run_profile.missing_settings(executor="local", **lone) == []
    assert len(run_profile.missing_settings(executor="slurm", **lone)) == 1
