#!/usr/bin/env bash
# Install (if missing) what the paper-ready output tests use (tests/test_paper_ready.py):
# pdflatex with booktabs, to compile every LaTeX table and figure in a one- and a
# two-column paper, and headless Chromium, to open the summary and the report.
#
# Debian packages, without recommends (no TeX documentation, no extra fonts):
#   texlive-latex-base         pdflatex, article, graphicx, geometry
#   texlive-latex-recommended  booktabs (\toprule ...), which every table needs
#   chromium                   the browser (driven over --remote-debugging-pipe: no driver)
# Running it again when everything is there is a quick no-op. Run as root
# (`make test` does, before the tests).
set -euo pipefail

PACKAGES=(texlive-latex-base texlive-latex-recommended chromium)

[[ $(id -u) -eq 0 ]] || { echo "paper-tools: must run as root" >&2; exit 1; }

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "paper-tools: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Lock timeout: another apt/dpkg run (tools/slurm-local/start.sh) may still be going on.
    timeout 600 apt-get -o DPkg::Lock::Timeout=300 update -qq
    timeout 1800 apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
        "${missing[@]}"
fi
for tool in pdflatex chromium; do
    command -v "$tool" >/dev/null || { echo "paper-tools: $tool is still missing" >&2; exit 1; }
done
