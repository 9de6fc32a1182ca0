#!/usr/bin/env bash
# Gather the project's Python dependencies as wheels for a GPU machine that has Python 3.12 and a CUDA build of
# PyTorch but no package index (run it where PyPI is reachable). torch itself (and its CUDA/triton packages) is
# left out: the GPU machine keeps its own CUDA build.
#
#   bash tools/gpu/gather_wheels.sh [all|bench] [python-version]
#
# all   (default) every runtime dependency of pyproject.toml with its transitive dependencies, as resolved in .venv;
# bench what `python -m dpfl bench` needs beyond what the CUDA image it was made for already holds (numpy, pandas,
#       scipy, PyYAML, attrs, mpmath, absl-py), a few MiB, small enough to send with the working tree to a GPU job
#       runner that caps extra files (e.g. at 64 MiB).
# Wheels land in wheelhouse/py<version>/<set>/ (ignored by git); install them there with tools/gpu/install_and_bench.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
SET="${1:-all}"
PYV="${2:-3.12}"
OUT="wheelhouse/py${PYV/./}/$SET"
PIP=".venv/bin/pip"
[ -x "$PIP" ] || { echo "gather_wheels: .venv is missing: run 'make test' (or make reproduce) first" >&2; exit 2; }
mkdir -p "$OUT"
REQ="$(mktemp)"
trap 'rm -f "$REQ"' EXIT
case "$SET" in
  all)
    # every installed distribution of the project's environment except torch, its CUDA stack, pytest and the project
    "$PIP" freeze --exclude-editable | grep -viE '^(torch|triton|nvidia-|pytest|pluggy|iniconfig|dpfl)' > "$REQ" ;;
  bench)
    # the accountants (dp-accounting, opacus) and the config validator (jsonschema), pinned as in .venv
    "$PIP" freeze --exclude-editable | grep -iE '^(dp-accounting|dm-tree|opacus|jsonschema|jsonschema-specifications|referencing|rpds-py|typing.extensions)==' > "$REQ" ;;
  *) echo "gather_wheels: unknown set '$SET'; allowed: all, bench" >&2; exit 2 ;;
esac
# binary wheels for CPython $PYV on x86-64 Linux (pure-Python wheels match any platform); a package published only as
# a source archive is built into a wheel here (fails loudly if it is not pure Python)
: > "$OUT/download.log"
while read -r req; do
  [ -n "$req" ] || continue
  if ! "$PIP" download --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp \
      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
      --dest "$OUT" "$req" >> "$OUT/download.log" 2>&1; then
    BUILD="$(mktemp -d)"
    "$PIP" wheel --no-deps --wheel-dir "$BUILD" "$req" >> "$OUT/download.log" 2>&1 || {
      echo "gather_wheels: no $PYV wheel and no buildable source for $req; see $OUT/download.log" >&2; exit 1; }
    built="$(ls "$BUILD"/*.whl)"
    case "$built" in *-py3-none-any.whl|*-py2.py3-none-any.whl)
        mv "$built" "$OUT/"; echo "gather_wheels: built $(basename "$built") from source (no $PYV wheel on PyPI)" ;;
      *) echo "gather_wheels: $req has no $PYV wheel and is not pure Python: $(basename "$built")" >&2; exit 1 ;; esac
    rm -rf "$BUILD"
  fi
done < "$REQ"
cp "$REQ" "$OUT/requirements.txt"
# drop wheels of versions no longer pinned (a rerun after a pin changed), so that the folder holds one of each
keep="$(sed -E 's/==/-/; s/[-_.]+/_/g' "$REQ" | tr 'A-Z' 'a-z')"
for whl in "$OUT"/*.whl; do
  nv="$(basename "$whl" | cut -d- -f1-2 | sed -E 's/[-_.]+/_/g' | tr 'A-Z' 'a-z')"
  grep -qxF "$nv" <<< "$keep" || { echo "gather_wheels: removed $(basename "$whl") (not pinned now)"; rm -f "$whl"; }
done
echo "gather_wheels: $(ls "$OUT"/*.whl | wc -l) wheels, $(du -sh "$OUT" | cut -f1) in $OUT"
