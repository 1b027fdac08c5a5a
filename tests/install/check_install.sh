#!/usr/bin/env bash
# `make install-check`: build the wheel and the sdist as a user would, install EACH into a fresh venv
# outside the checkout, and run a real-client round trip against the installed `minikafka serve`; in the
# wheel's venv, also run the user project tests/sample_project with `pytest -n 2` (the plugin from the wheel).
#
#   tests/install/check_install.sh [SOURCE_DIR]      (default: this checkout)
#
# The sources are copied first (git's tracked and untracked-but-not-ignored files, as in the working
# tree), so a stale build/ or *.egg-info in the checkout can neither hide nor add a file, and the
# checkout is left untouched. Environment: PYTHON (interpreter for the fresh venvs, default python3),
# BUILD_PYTHON (one that has `build`; default: a throwaway venv gets it from PyPI).
# Exits non-zero on any problem; the broker and the temp dir are removed in every case.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "${1:-$here/../..}" && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/minikafka-install.XXXXXX")
started=$SECONDS

cleanup() {
  local pid_file pid
  for pid_file in "$work"/run-*/broker.pid; do
    [[ -f $pid_file ]] || continue
    pid=$(<"$pid_file")
    # roundtrip.py stops its broker itself; this only catches one it left behind by dying first.
    if kill -0 "$pid" 2>/dev/null; then
      echo "install-check: killing leftover broker $pid" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf 'install-check [%3ds]: %s\n' $((SECONDS - started)) "$*"; }

# Runs a command quietly, showing its output only when it fails.
quiet() {
  local log="$work/last-command.log"
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "install-check: FAILED: $*" >&2
    return 1
  fi
}

pip_install() { quiet "$1/bin/python" -m pip install --disable-pip-version-check --no-input "${@:2}"; }

step "copying $source_dir to $work/src"
mkdir "$work/src"
if git -C "$source_dir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # -c lists tracked files deleted in the working tree too: keep only what exists.
  (cd "$source_dir" && git ls-files -z -c -o --exclude-standard \
    | while IFS= read -r -d '' file; do if [[ -e $file ]]; then printf '%s\0' "$file"; fi; done \
    | tar --null -T - -cf -) | tar -xf - -C "$work/src"
else
  tar -C "$source_dir" -cf - --exclude=.git --exclude=.venv --exclude=build --exclude=dist --exclude='*.egg-info' \
    --exclude=node_modules --exclude=data --exclude=__pycache__ . | tar -xf - -C "$work/src"
fi
# Nothing below runs inside the checkout, so its folders cannot shadow the installed package.
cd "$work"

build_python=${BUILD_PYTHON:-}
if [[ -z $build_python ]] || ! "$build_python" -c 'import build' 2>/dev/null; then
  step "installing build into a throwaway venv"
  quiet "$python" -m venv "$work/build-venv"
  pip_install "$work/build-venv" 'build>=1.2'
  build_python=$work/build-venv/bin/python
fi

step "building the sdist and the wheel"
# Both from the source tree (as `pip wheel .` does); installing the sdist below rebuilds the wheel from it.
quiet "$build_python" -m build --sdist --wheel --outdir "$work/dist" "$work/src"
wheel=$(echo "$work"/dist/minikafka-*.whl)
sdist=$(echo "$work"/dist/minikafka-*.tar.gz)
[[ -f $wheel && -f $sdist ]] || { echo "install-check: FAILED: build made no wheel or no sdist" >&2; exit 1; }
"$python" "$here/check_dists.py" "$work/src" "$wheel" "$sdist"

for kind in wheel sdist; do
  artifact=$wheel
  [[ $kind == sdist ]] && artifact=$sdist
  venv="$work/venv-$kind"
  step "installing the $kind $(basename "$artifact") and confluent-kafka (+ pytest, xdist: wheel) into a fresh venv"
  quiet "$python" -m venv "$venv"
  if [[ $kind == wheel ]]; then
    # The sample project's test dependencies (minikafka, pytest, pytest-xdist, confluent-kafka) in the same
    # pip run: the wheel given by path is what satisfies its `minikafka`.
    pip_install "$venv" "$artifact" -r "$work/src/tests/sample_project/requirements-test.txt"
  else
    pip_install "$venv" "$artifact" 'confluent-kafka>=2.3'
  fi
  mkdir "$work/run-$kind"
  step "round trip against the broker installed from the $kind"
  "$venv/bin/python" -I "$here/roundtrip.py" --minikafka "$venv/bin/minikafka" --work-dir "$work/run-$kind"
  if [[ $kind == wheel ]]; then
    # A user's project, outside the checkout: the pytest plugin must come from the installed wheel alone.
    step "pytest -n 2 in a copy of tests/sample_project, with the plugin from the wheel"
    cp -R "$work/src/tests/sample_project" "$work/sample-project"
    (cd "$work/sample-project" && quiet "$venv/bin/pytest" -n 2 -p no:cacheprovider -q)
  fi
done

step "passed: the wheel and the sdist install, serve, and pass the confluent-kafka round trip; the sample" \
  "project's tests pass with the plugin from the wheel under pytest -n 2"
