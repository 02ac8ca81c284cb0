#!/usr/bin/env bash
# Snakemake runs this in the new environment after creating it (--sdm conda): the
# rule scripts import the workflow's own package, installed here from this checkout.
set -euo pipefail
python -m pip install --no-deps -e "$(dirname "$0")/.."
