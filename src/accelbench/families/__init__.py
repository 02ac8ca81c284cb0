"""The experiment families, each declared in one module of this package.

A declaration (accelbench.families.base.Family) carries everything about its
family: the experiment's parameters and result path, which cells make sense, its
config section's checks and settings, the rule that runs it and the function that
measures it. The grid, the target checks, the tidy table, the record schema, the
measuring dispatch and the run's bookkeeping iterate over FAMILIES; adding a family
is its declaration, its measuring code, its rule, and one line here.
"""

from __future__ import annotations

from accelbench.families import datasci, kernel, roof, train
from accelbench.families.base import Family, family_of

# In this order in the grid, the record schema and the tidy table's columns.
FAMILIES: dict[str, Family] = {
    family.name: family for family in (kernel.FAMILY, train.FAMILY, roof.FAMILY, datasci.FAMILY)
}

__all__ = ["FAMILIES", "Family", "family_of"]
