#!/usr/bin/env bash
# The demo's SVG writer (service/plot.c): plot_write draws known data,
# plot_check.py parses the file as SVG and reads every point back.
set -euo pipefail
"$1" "$TEST_TMPDIR/plot.svg"
python3 "$2" "$TEST_TMPDIR/plot.svg"
