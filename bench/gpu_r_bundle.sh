#!/usr/bin/env bash
# R that travels (issue #35, part 1): R, reticulate and gpukeras for a machine that has
# Python but no R, no package registry and no network, such as the lent GPU machines.
#
#   bash bench/gpu_r_bundle.sh [DIR]          # gather the bundle into DIR (default .gpu-r)
#   bash bench/gpu_r_bundle.sh --prove [DIR]  # and run it here with the system's R hidden
#
# What DIR holds, all from Debian bookworm and PyPI (nothing installed system-wide):
#   r.tar.xz  r-base-core, the Debian R packages gpukeras needs at run time (its Imports and
#             theirs; reticulate's, recommended ones such as Matrix included), and the shared
#             libraries all of them load (found with ldd here): .deb files from
#             `apt-get download`, unpacked, less their documentation, translations and R's
#             X11, Tcl/Tk, cairo and internet modules; libc, libgcc and libstdc++ stay the
#             target's own (debs.txt lists the .debs)
#   library/  gpukeras built from this tree (the files git tracks or would add), and
#             reticulate >= 1.38 (Debian trixie's 1.41, built from its source package by
#             `make` into .newer-stack/library): the GPU machines' NumPy is 2.x, which
#             bookworm's reticulate 1.28 predates
#   wheels/   keras, namex and optree for Python 3.12 (the GPU machines lack or may lack them),
#             and optuna with its requirements but NumPy, for gpu_search()
#   Rscript   the runner (bench/lib/bundle_rscript.sh): unpacks r.tar.xz once, then runs
#             the bundle's Rscript with R_HOME, PATH, LD_LIBRARY_PATH and R_LIBS set to the
#             bundle and RETICULATE_PYTHON to the machine's Python
#
# The device tool carries at most 64 MiB with the working tree: the script prints the
# bundle's size and fails above BUNDLE_LIMIT_MIB (default 58).
#
# --prove runs bench/r_on_gpu.R --smoke through DIR/Rscript in a mount namespace where the
# system's R folders are empty (unshare -m, bind mounts), on KERAS_BACKEND=jax, with the
# Python PYTHON names (default: the r-gpukeras environment's). It needs root or unprivileged
# user namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."
prove=false
if [ "${1:-}" = "--prove" ]; then
  prove=true
  shift
fi
bundle=${1:-.gpu-r}
limit_mib=${BUNDLE_LIMIT_MIB:-58}
newer_lib=.newer-stack/library
rscript="Rscript --no-save --no-restore"
sudo=$([ "$(id -u)" = 0 ] || echo sudo)

prove_bundle() {
  local python=${PYTHON:-$($rscript -e 'cat(reticulate::virtualenv_python("r-gpukeras"))')}
  local empty no_r
  empty=$(mktemp -d)
  no_r=$empty/no-r
  printf '#!/bin/sh\necho "the system R is hidden" >&2\nexit 127\n' > "$no_r"
  chmod +x "$no_r"
  local hide="set -e"
  for folder in /usr/lib/R /usr/share/R /etc/R /usr/local/lib/R; do
    [ -d "$folder" ] && hide="$hide; mount --bind $empty $folder"
  done
  for program in /usr/bin/R /usr/bin/Rscript; do
    [ -e "$program" ] && hide="$hide; mount --bind $no_r $program"
  done
  local user=()
  [ "$(id -u)" = 0 ] || user=(-r)
  echo "== the bundle with the system's R hidden (Python: $python)"
  local status=0
  unshare -m "${user[@]}" bash -c "$hide; ! command -v R >/dev/null || ! R --version >/dev/null 2>&1
    KERAS_BACKEND=jax PYTHON='$python' GPUKERAS_R_ROOT='$empty/root' '$bundle/Rscript' bench/r_on_gpu.R --smoke" ||
    status=$?
  # A Python without its shared library, as pyenv builds by default: its sysconfig says
  # static (a copy of the real one's, through _PYTHON_SYSCONFIGDATA_NAME)
  local static=$empty/static data
  mkdir -p "$static"
  data=$("$python" -c 'import sysconfig; print(sysconfig._get_sysconfigdata_name())')_static
  "$python" -c '
import pprint, sys, sysconfig
found = dict(sysconfig.get_config_vars())
static = "libpython%d.%d.a" % sys.version_info[:2]
found.update(Py_ENABLE_SHARED=0, LDLIBRARY=static, INSTSONAME=static)
print("build_time_vars = " + pprint.pformat(found))' > "$static/$data.py"
  printf '#!/bin/sh
PYTHONPATH=%s _PYTHON_SYSCONFIGDATA_NAME=%s exec %s "$@"
' "$static" "$data" "$python" \
    > "$static/python"
  chmod +x "$static/python"
  echo "== the bundle with a Python that has no shared library"
  local said refused=0
  said=$(PYTHON="$static/python" GPUKERAS_R_ROOT="$empty/root" "$bundle/Rscript" -e 1 2>&1) || refused=$?
  echo "$said (exit status $refused)"
  rm -rf "$empty"
  if [ "$refused" != 3 ] || ! grep -q "has no shared library" <<< "$said"; then
    echo "the runner should have refused that Python with exit status 3" >&2
    return 1
  fi
  return "$status"
}

if [ ! -f "$newer_lib/reticulate/DESCRIPTION" ]; then
  make --no-print-directory "$PWD/$newer_lib/reticulate/DESCRIPTION"
fi
rm -rf "$bundle"
mkdir -p "$bundle/library" "$bundle/wheels"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== gpukeras, built from this tree"
# From a copy of the files git tracks or would add (ignored ones left out), made outside the
# tree: R CMD build (R 4.2) copies the whole folder it is given before it drops what
# .Rbuildignore names, and stops when a file vanishes meanwhile, which an R CMD check of the
# same tree (make rcheck) does in gpukeras.Rcheck/ while its tests run (outside a git work
# tree: the tree).
source=$PWD
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  source=$work/gpukeras
  mkdir -p "$source"
  git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$source"
fi
(cd "$work" && R CMD build --no-build-vignettes --no-manual "$source" > build.log 2>&1) ||
  { cat "$work/build.log"; exit 1; }
R CMD INSTALL --no-multiarch --no-docs --no-html -l "$bundle/library" "$work"/gpukeras_*.tar.gz \
  > "$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
cp -r "$newer_lib/reticulate" "$bundle/library/"

echo "== the R packages they need, and the Debian packages holding them"
# Every package gpukeras and reticulate import (recursively), less the base ones, which
# come with r-base-core; Debian names a CRAN package r-cran-<lowercase name>.
r_debs=$($rscript -e '
  db <- utils::installed.packages(lib.loc = c(commandArgs(TRUE)[1], .libPaths()))
  db <- db[!duplicated(db[, "Package"]), , drop = FALSE]
  needed <- tools::package_dependencies(c("gpukeras", "reticulate"), db = db, recursive = TRUE,
                                        which = c("Depends", "Imports", "LinkingTo"))
  needed <- setdiff(unique(unlist(needed)), c("gpukeras", "reticulate", rownames(db)[db[, "Priority"] %in% "base"]))
  cat(paste0("r-cran-", tolower(sort(needed))), sep = "\n")' "$bundle/library")
packages="r-base-core $r_debs"
for package in $packages; do
  dpkg -s "$package" > /dev/null 2>&1 || { echo "$package is not installed here: make deps first" >&2; exit 1; }
done

fetch() {  # fetch PACKAGE...: download the .debs and unpack them into the tree
  if ! (cd "$work/debs" && apt-get download -qq "$@" 2> "$work/apt.log"); then
    # apt's package lists may be missing or stale on a machine that installed nothing lately
    $sudo apt-get update -qq
    (cd "$work/debs" && apt-get download -qq "$@" 2> "$work/apt.log") || { cat "$work/apt.log"; exit 1; }
  fi
  for package in "$@"; do
    dpkg-deb -x "$work/debs/${package}"_*.deb "$work/tree"
  done
}
mkdir -p "$work/debs" "$work/tree"
fetch $packages

# What an R session that trains never reads: documentation, translations, R's X11, Tcl/Tk,
# cairo and internet modules (and so the libraries only they load).
prune() {
  local r=$work/tree/usr/lib/R
  rm -rf "$work/tree/usr/share/doc" "$work/tree/usr/share/man" "$work/tree/usr/share/locale" \
    "$work/tree/usr/share/lintian" "$work/tree/usr/share/icons" "$work/tree/usr/share/texmf" \
    "$work/tree/usr/share/bash-completion" "$work/tree/usr/share/R/doc" "$work/tree/usr/share/info" \
    "$r/library/tcltk" "$r/library/translations" "$r/modules/R_X11.so" "$r/modules/R_de.so" \
    "$r/modules/internet.so" "$r/library/grDevices/libs/cairo.so"
  find "$r/library" "$r/site-library" "$bundle/library" -mindepth 2 -maxdepth 2 -type d \
    \( -name html -o -name help -o -name doc -o -name po -o -name tests -o -name demo \
    -o -name examples -o -name include \) -exec rm -rf {} +
}
prune

# The shared libraries what is left loads, as ldd resolves them here, each mapped to its
# Debian package; libc, libgcc and libstdc++ stay the target machine's. One dpkg -S for them
# all (one for each took 10 s of CPU), then one for those it found no package of, under the
# /usr merge's other name.
objects=$(find "$work/tree/usr/lib/R" "$bundle/library" -type f \( -name '*.so' -o -path '*/bin/exec/R' \))
libraries=$(
  for object in $objects; do
    ldd "$object" | awk '$3 ~ /^\// { print $3 }'
  done | sort -u | xargs -r readlink -f | sort -u
)
owners() { # owners PATH...: "PACKAGE PATH" for each path a package holds
  [ $# -eq 0 ] || dpkg -S "$@" 2> /dev/null | sed -n '/^diversion /!s/^\([^:,]*\).*: \(\/[^ ]*\)$/\1 \2/p' || true
}
owned=$(owners $libraries)
unowned=$(comm -23 <(echo "$libraries") <(echo "$owned" | cut -d ' ' -f 2 | sort -u))
library_debs=$(
  { echo "$owned"; owners $(for path in $unowned; do echo "${path#/usr}" "/usr$path"; done); } | cut -d ' ' -f 1 |
    sort -u | grep -v -x -E 'libc6|libgcc-s1|libstdc\+\+6|r-base-core|r-cran-.*|' || true
)
echo "   $(echo $r_debs | wc -w) R packages, and $(echo $library_debs | wc -w) Debian packages of the libraries they load"
fetch $library_debs
prune
# Debian's R_HOME/etc holds links to /etc/R, and Renviron is made at install from
# Renviron.ucf: the files themselves instead, less the site's library folders
# (Renviron.site adds /usr/local/lib/R/site-library and /usr/lib/R/library)
for link in "$work/tree/usr/lib/R/etc"/*; do
  if [ -L "$link" ]; then
    target=$(readlink "$link")
    rm "$link"
    if [ -e "$work/tree$target" ]; then cp "$work/tree$target" "$link"; fi
  fi
done
cp "$work/tree/usr/lib/R/etc/Renviron.ucf" "$work/tree/usr/lib/R/etc/Renviron"
echo "# gpukeras' R bundle: R_LIBS, R_LIBS_SITE and R_LIBS_USER come from its runner" \
  > "$work/tree/usr/lib/R/etc/Renviron.site"
# xz on every core (-T0): the same format, 2x faster on two cores (XZ_OPT, where set,
# instead: bench/gpu_verify.sh's smoke run sets -0, fast)
XZ_OPT=${XZ_OPT:--T0} tar -C "$work/tree" -cJf "$bundle/r.tar.xz" .
ls "$work/debs" > "$bundle/debs.txt"

echo "== keras, namex, optree and optuna (gpu_search()) wheels for Python 3.12"
pinned() { sed -n "s/.*$1 = \"\(.*\)\".*/\1/p" R/install.R | head -n 1; }
# optuna's own requirements but NumPy (the machines have it): named, so that --no-deps
# takes no NumPy (16 MiB) along
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$bundle/wheels" "keras==$(pinned keras)" namex optree "optuna==$(pinned optuna)" \
  alembic sqlalchemy mako markupsafe colorlog tqdm pyyaml typing_extensions packaging \
  2> >(grep -v "is ignored: it is neither" >&2)

cp bench/lib/bundle_rscript.sh "$bundle/Rscript"
chmod +x "$bundle/Rscript"
size_mib=$(( $(du -sb "$bundle" | cut -f1) / 1048576 ))
echo "== $bundle: ${size_mib} MiB (r.tar.xz from $(wc -l < "$bundle/debs.txt") .deb files, $(ls "$bundle/library" | wc -l) built R packages, $(ls "$bundle/wheels" | wc -l) wheels)"
if [ "$size_mib" -gt "$limit_mib" ]; then
  echo "the bundle is over ${limit_mib} MiB: with the working tree it would not travel" >&2
  exit 1
fi
if $prove; then
  prove_bundle
fi
