#!/usr/bin/env bash
# Rscript from the bundle bench/gpu_r_bundle.sh gathered (copied there as DIR/Rscript), on a
# machine with Python but without R:
#
#   PYTHON=/path/to/python3 DIR/Rscript script.R [arguments]
#
# PYTHON: the Python reticulate embeds (default: python3 on the PATH); it must have its shared
# library (libpython3.X.so), which reticulate loads. A Python built without one (pyenv's
# default, some distributions' static builds) cannot be embedded: the runner says so and
# exits with status 3 before starting R. GPUKERAS_R_ROOT: where r.tar.xz is unpacked, once
# per bundle (default ${TMPDIR:-/tmp}/gpukeras-r-<uid>).
#
# The bundle's Debian libraries are used only where the machine has no library of that
# name (ldconfig -p), so R and Python share the machine's own where it has one.
set -euo pipefail
bundle=$(cd "$(dirname "$0")" && pwd)
root=${GPUKERAS_R_ROOT:-${TMPDIR:-/tmp}/gpukeras-r-$(id -u)}
sys=$root/sys
rhome=$sys/usr/lib/R

unpack() {
  rm -rf "$root"
  mkdir -p "$sys" "$root/lib"
  local name
  tar -C "$sys" -xJf "$bundle/r.tar.xz"
  # R's start script names its folders; Rscript finds R through RHOME (below)
  sed -i -e "s#^R_HOME_DIR=.*#R_HOME_DIR=$rhome#" \
    -e "s#^R_SHARE_DIR=.*#R_SHARE_DIR=$sys/usr/share/R/share#" \
    -e "s#^R_INCLUDE_DIR=.*#R_INCLUDE_DIR=$sys/usr/share/R/include#" \
    -e "s#^R_DOC_DIR=.*#R_DOC_DIR=$sys/usr/share/R/doc#" "$rhome/bin/R"
  # the libraries the machine lacks, by the name programs ask for (BLAS and LAPACK sit in
  # folders of their own, behind Debian's alternatives)
  while IFS= read -r path; do
    name=$(basename "$path")
    if ! ldconfig -p | grep -q "^[[:space:]]$name "; then
      ln -sf "$path" "$root/lib/$name"
    fi
  done < <(find "$sys/usr/lib/x86_64-linux-gnu" "$sys/lib/x86_64-linux-gnu" -maxdepth 2 \
    -name 'lib*.so.*' 2> /dev/null)
  ls -l "$bundle/r.tar.xz" > "$root/unpacked-from"
}

if ! cmp -s <(ls -l "$bundle/r.tar.xz") "$root/unpacked-from" 2> /dev/null; then
  unpack
fi

python=$(command -v "${PYTHON:-python3}") || { echo "no Python: set PYTHON" >&2; exit 3; }
libpython=$("$python" - << 'EOF'
import os, sys, sysconfig
get = sysconfig.get_config_var
names = [n for n in (get("LDLIBRARY"), get("INSTSONAME")) if n and ".so" in n]
for folder in (get("LIBDIR"), get("LIBPL"), os.path.join(sys.base_prefix, "lib")):
    for name in names:
        if folder and os.path.exists(os.path.join(folder, name)):
            print(os.path.join(folder, name))
            raise SystemExit
EOF
)
if [ -z "$libpython" ]; then
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  echo "$python has no shared library (libpython$version.so): it was built without" \
    "--enable-shared, and reticulate can only embed a Python that has one. Set PYTHON to" \
    "one that does (Debian's and Ubuntu's python3 with libpython$version, uv's, conda's)." >&2
  exit 3
fi

# Keras and what it needs beside the machine's packages, from the bundle's wheels (made for
# Python 3.12, the GPU machines'; another Python keeps what it has)
if ! "$python" -c 'import keras, namex, optree' 2> /dev/null && ls "$bundle"/wheels/*.whl > /dev/null 2>&1; then
  if "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$root/site" "$bundle"/wheels/*.whl; then
    export PYTHONPATH=$root/site${PYTHONPATH:+:$PYTHONPATH}
  else
    echo "the bundle's wheels do not install in $python: it keeps the packages it has" >&2
  fi
fi

export R_HOME=$rhome RHOME=$rhome RETICULATE_PYTHON=$python
export R_LIBS=$bundle/library R_LIBS_SITE=$rhome/site-library R_LIBS_USER=$root/no-user-library
export PATH=$rhome/bin:$PATH LD_LIBRARY_PATH=$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
exec "$rhome/bin/Rscript" "$@"
