"""The example's units keep accelbench's contract: python -m pytest examples/my_benchmarks"""

from pathlib import Path

import pytest

from accelbench import contracts, registry

UNITS = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("kind", "name"), [("kernels", "axpby"), ("datasci", "latest"), ("models", "tiny-cnn")]
)
def test_each_unit_keeps_its_contract_and_matches_its_reference_on_every_backend_here(kind, name):
    registry.use_plugins([UNITS])
    checked = contracts.check_unit(kind, name)
    registry.use_plugins([])
    assert [str(problem) for problem in checked.problems] == []
