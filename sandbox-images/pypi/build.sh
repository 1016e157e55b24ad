#!/usr/bin/env bash
# Build a hardened, non-root image for a PyPI MCP server with no container registry:
# a Debian bookworm rootfs made by debootstrap, plus the server's wheels installed offline
# from a hash-pinned lock, imported with `elengtis images import`. See README.md here.
#
#   sandbox-images/pypi/build.sh PACKAGE==VERSION IMAGE_REF [ENTRYPOINT_MODULE]
#   sandbox-images/pypi/build.sh mcp-server-time==2026.10.19 \
#       elengtis/mcp-server-time:2026.10.19 mcp_server_time
#
# Environment:
#   ELENGTIS                   elengtis executable (default: `elengtis` on PATH)
#   ELENGTIS_CACHE             cache dir for the debootstrapped base (default ~/.cache/elengtis)
#   ELENGTIS_PYPI_LOCK         lock file (default: <script dir>/<normalised package>.lock)
#   ELENGTIS_PYPI_LOCK_UPDATE  1: resolve PACKAGE==VERSION afresh and (re)write the lock first
#   ELENGTIS_PYPI_IGNORE_REQUIRES_PYTHON
#                              1: let pip ignore a package's Requires-Python (for a package whose
#                              metadata asks for a newer Python than bookworm's 3.11 but runs
#                              on it, such as elengtis 0.1.0); recorded in build-info
#   ELENGTIS_IMAGE_ENV         extra image environment, space-separated KEY=VALUE words, each
#                              passed as `--env KEY=VALUE` (default none: mcp-server-time
#                              writes nowhere, see README.md)
#   DEBIAN_MIRROR              Debian mirror (default http://deb.debian.org/debian)
#   PYTHON                     host Python that runs `pip download` (default python3)
#   TMPDIR                     where the work dir goes (default /tmp); removed on every exit
set -euo pipefail

SUITE=bookworm
VARIANT=minbase
INCLUDE=python3,python3-venv,tzdata
ARCH=amd64
# The rootfs's CPython (bookworm: 3.11) and glibc (2.36): wheels are chosen for these.
PY_VERSION=3.11
PY_ABI=cp311
GLIBC_MINOR=36
# Packages needed only to build the venv; purged before packing.
BUILD_ONLY_DEBS=(python3-venv python3.11-venv python3-pip-whl python3-setuptools-whl)
UID_GID=65534:65534
VENV=/opt/venv
# Bump when the cached base's contents would change for a reason the key does not show.
CACHE_FORMAT=1

die() { echo "build.sh: error: $*" >&2; exit 1; }
log() { echo "build.sh: [$((SECONDS - ${START:-0}))s] $*" >&2; }
usage() {
    sed -n '6,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

START=$SECONDS
[[ $# -ge 2 && $# -le 3 ]] || usage
SPEC=$1
IMAGE_REF=$2
[[ $SPEC =~ ^([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)==([A-Za-z0-9._+!-]+)$ ]] \
    || die "PACKAGE==VERSION expected (an exact pin), got '$SPEC'"
PKG_RAW=${BASH_REMATCH[1]}
PKG_VERSION=${BASH_REMATCH[3]}
# PEP 503 normalised name: lower case, runs of [-_.] become '-'.
PKG=$(printf '%s' "$PKG_RAW" | tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/-/g')
MODULE=${3:-${PKG//-/_}}
[[ $MODULE =~ ^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$ ]] \
    || die "ENTRYPOINT_MODULE must be a dotted Python module name, got '$MODULE'"
[[ $IMAGE_REF =~ ^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$ ]] \
    || die "IMAGE_REF must look like name[:tag], got '$IMAGE_REF'"
[[ $(id -u) -eq 0 ]] || die "must run as root (debootstrap and chroot need it)"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOCK=${ELENGTIS_PYPI_LOCK:-$HERE/$PKG.lock}
ELENGTIS_BIN=${ELENGTIS:-elengtis}
CACHE_DIR=${ELENGTIS_CACHE:-$HOME/.cache/elengtis}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
PYTHON=${PYTHON:-python3}

# ---- work dir, cleaned up on every exit ---------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/elengtis-pypi.XXXXXXXX")
ROOT=$WORK/rootfs
BG_PID=
cleanup() {
    local rc=$? m
    # debootstrap runs in its own session (it does not stop on SIGINT); end it by its id.
    if [[ -n $BG_PID ]]; then
        kill -KILL -- "-$BG_PID" 2>/dev/null || true
        wait "$BG_PID" 2>/dev/null || true
    fi
    # Unmount anything left under the work dir (deepest first) before deleting it, so a
    # stray bind mount can never make rm reach outside.
    if [[ -r /proc/self/mounts ]]; then
        while read -r m; do
            umount -l "$m" 2>/dev/null || true
        done < <(awk -v w="$WORK" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r)
    fi
    rm -rf --one-file-system -- "$WORK"
    log "removed the work dir"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- host tools ---------------------------------------------------------------------------
apt_install() {
    log "installing $* with apt-get"
    export DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
[[ -r $KEYRING ]] || missing+=(debian-archive-keyring)
command -v gpgv >/dev/null || missing+=(gpgv)
"$PYTHON" -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if ((${#missing[@]})); then
    apt_install "${missing[@]}"
    "$PYTHON" -m pip --version >/dev/null 2>&1 || PYTHON=/usr/bin/python3
fi

# ---- wheels: the lock is the reproducibility anchor ---------------------------------------
PIP_TARGET=(--only-binary=:all: --implementation cp --python-version "$PY_VERSION"
    --abi "$PY_ABI")
for ((m = GLIBC_MINOR; m >= 17; m--)); do PIP_TARGET+=(--platform "manylinux_2_${m}_x86_64"); done
PIP_TARGET+=(--platform manylinux2014_x86_64 --platform any)
# An explicit opt-in, for both the download (lock) and the offline install; never a default.
case ${ELENGTIS_PYPI_IGNORE_REQUIRES_PYTHON:-0} in
    0) IGNORE_RP=() ;;
    1) IGNORE_RP=(--ignore-requires-python) ;;
    *) die "ELENGTIS_PYPI_IGNORE_REQUIRES_PYTHON must be 0 or 1, got '$ELENGTIS_PYPI_IGNORE_REQUIRES_PYTHON'" ;;
esac
PIP_TARGET+=(${IGNORE_RP[@]+"${IGNORE_RP[@]}"})
pip_download() { "$PYTHON" -m pip download --disable-pip-version-check --quiet "${PIP_TARGET[@]}" "$@"; }

# Writes "name==version --hash=sha256:..." lines for the wheels in $1, sorted by name.
lock_lines() {
    "$PYTHON" - "$1" <<'EOF'
import hashlib, pathlib, re, sys
rows = []
for whl in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    name, version = whl.name.split("-")[:2]
    name = re.sub(r"[-_.]+", "-", name).lower()
    digest = hashlib.sha256(whl.read_bytes()).hexdigest()
    rows.append(f"{name}=={version} --hash=sha256:{digest}")
print("\n".join(sorted(rows)))
EOF
}

if [[ ${ELENGTIS_PYPI_LOCK_UPDATE:-0} == 1 ]]; then
    log "resolving $PKG==$PKG_VERSION for CPython $PY_VERSION manylinux x86_64 (lock update)"
    mkdir "$WORK/resolve"
    pip_download --dest "$WORK/resolve" "$PKG==$PKG_VERSION"
    {
        echo "# $PKG==$PKG_VERSION and its dependencies: wheels for CPython $PY_VERSION ($PY_ABI)"
        echo "# on Debian $SUITE x86_64 (glibc 2.$GLIBC_MINOR). Written by build.sh with"
        echo "# ELENGTIS_PYPI_LOCK_UPDATE=1; installed offline with pip --require-hashes."
        lock_lines "$WORK/resolve"
    } >"$LOCK.new"
    mv "$LOCK.new" "$LOCK"
    log "wrote $LOCK ($(grep -c -- '--hash=' "$LOCK") wheels)"
fi
[[ -f $LOCK ]] || die "no lock file $LOCK; create it once with ELENGTIS_PYPI_LOCK_UPDATE=1 and commit it"
grep -Eq "^$PKG==$(printf '%s' "$PKG_VERSION" | sed 's/[.+]/\\&/g') " "$LOCK" \
    || die "$LOCK does not pin $PKG==$PKG_VERSION; rerun with ELENGTIS_PYPI_LOCK_UPDATE=1 to re-lock"

log "downloading the locked wheels (hash-checked)"
WHEELS=$WORK/wheels
mkdir "$WHEELS"
grep -v '^#' "$LOCK" >"$WHEELS/requirements.txt"
pip_download --dest "$WHEELS" --require-hashes -r "$WHEELS/requirements.txt"
# pip checked each download against the lock; check the files we are about to install too,
# and that nothing outside the lock came along.
diff <(lock_lines "$WHEELS") <(grep -v '^#' "$LOCK" | LC_ALL=C sort) >/dev/null \
    || die "downloaded wheels differ from $LOCK"

# ---- base rootfs: debootstrap, cached as a tarball keyed by what went into it --------------
KEY=$(printf '%s\n' "$CACHE_FORMAT" "$SUITE" "$VARIANT" "$INCLUDE" "$ARCH" "$MIRROR" \
    | sha256sum | cut -c1-16)
BASE_TAR=$CACHE_DIR/debootstrap/$SUITE-$VARIANT-$KEY.tar
mkdir -p "$ROOT"
if [[ -f $BASE_TAR ]]; then
    log "base rootfs from cache: $BASE_TAR"
    tar --numeric-owner -xpf "$BASE_TAR" -C "$ROOT"
else
    log "debootstrap $SUITE ($VARIANT, +$INCLUDE) from $MIRROR"
    # In the background, so that a signal reaches our traps at once rather than after it.
    setsid debootstrap --variant="$VARIANT" --arch="$ARCH" --include="$INCLUDE" \
        --keyring="$KEYRING" "$SUITE" "$ROOT" "$MIRROR" </dev/null >"$WORK/debootstrap.log" 2>&1 &
    BG_PID=$!
    wait "$BG_PID" || { tail -n 30 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
    BG_PID=
    rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* "$ROOT"/debootstrap
    # Optimisation only: a failed cache write must not fail the build.
    if mkdir -p "$(dirname "$BASE_TAR")" 2>/dev/null \
        && tar --numeric-owner --sort=name -C "$ROOT" -cf "$BASE_TAR.$$.tmp" . 2>/dev/null; then
        mv "$BASE_TAR.$$.tmp" "$BASE_TAR"
        log "cached the base rootfs at $BASE_TAR"
    else
        rm -f "$BASE_TAR.$$.tmp"
        log "warning: could not cache the base rootfs (continuing)"
    fi
fi
got=$(chroot "$ROOT" /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[[ $got == "$PY_VERSION" ]] || die "rootfs Python is $got, wheels were locked for $PY_VERSION"

# ---- venv with exactly the locked wheels, installed offline -------------------------------
log "installing $(wc -l <"$WHEELS/requirements.txt") wheels into $VENV (offline)"
in_root() {
    chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
        PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 "$@"
}
cp -r "$WHEELS" "$ROOT/tmp/wheels"
in_root /usr/bin/python3 -m venv --without-pip "$VENV"
# pip runs from Debian's own pip wheel, so neither pip nor setuptools ends up in the venv.
pip_whls=("$ROOT"/usr/share/python-wheels/pip-*.whl)
[[ -f ${pip_whls[0]} ]] || die "no pip wheel in the rootfs (python3-pip-whl)"
PIP_WHL=${pip_whls[0]#"$ROOT"/}
in_root "$VENV/bin/python" "/$PIP_WHL/pip" install --quiet --no-index --find-links /tmp/wheels \
    --require-hashes --only-binary=:all: ${IGNORE_RP[@]+"${IGNORE_RP[@]}"} -r /tmp/wheels/requirements.txt
in_root "$VENV/bin/python" "/$PIP_WHL/pip" check >&2
# `python -m MODULE` needs MODULE, or MODULE.__main__ for a package; checked without importing.
in_root "$VENV/bin/python" - "$MODULE" <<'EOF'
import importlib.util, sys
name = sys.argv[1]
spec = importlib.util.find_spec(name)
if spec and spec.submodule_search_locations is not None:
    spec = importlib.util.find_spec(name + ".__main__")
sys.exit(0 if spec else f"`python -m {name}` would fail: no such module in the venv")
EOF

# ---- trim and harden ----------------------------------------------------------------------
log "trimming the rootfs"
in_root dpkg --purge "${BUILD_ONLY_DEBS[@]}" >/dev/null
mkdir -p "$ROOT/etc/elengtis"
{
    echo "package: $PKG==$PKG_VERSION"
    echo "entrypoint: $VENV/bin/python -m $MODULE"
    echo "lock-sha256: $(sha256sum <"$LOCK" | cut -d' ' -f1)"
    [[ ${#IGNORE_RP[@]} -eq 0 ]] || echo "requires-python: ignored (ELENGTIS_PYPI_IGNORE_REQUIRES_PYTHON=1)"
    echo "base: debian $SUITE $VARIANT +$INCLUDE, purged ${BUILD_ONLY_DEBS[*]}"
    echo "debian-packages:"
    # shellcheck disable=SC2016 # dpkg-query's own ${field} syntax
    in_root dpkg-query -W -f='  ${Package}=${Version}\n'
    echo "wheels:"
    sed 's/^/  /' "$WHEELS/requirements.txt"
} >"$ROOT/etc/elengtis/build-info"
rm -rf "$ROOT"/tmp/* "$ROOT"/var/tmp/* "$ROOT"/root/.cache \
    "$ROOT"/var/cache/apt/* "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/debconf/*-old \
    "$ROOT"/var/lib/dpkg/*-old "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* \
    "$ROOT"/usr/share/python-wheels
# Message catalogues (about 33 MiB) are never used by a stdio server; keep locale.alias.
find "$ROOT/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
find "$ROOT/var/log" -type f -delete
# Keep the licence texts, drop the rest of the docs.
find "$ROOT/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$ROOT/usr/share/doc" -mindepth 1 -type d -empty -delete
# Docker supplies /dev, /proc, /sys and /run; the image ships them empty.
find "$ROOT/dev" "$ROOT/proc" "$ROOT/sys" "$ROOT/run" -mindepth 1 -delete
: >"$ROOT/etc/machine-id"
# no-new-privileges already neuters set-id bits at run time; remove them anyway.
find "$ROOT" -xdev -type f -perm /6000 -exec chmod ug-s {} +
# The container root is read-only; /tmp is a tmpfs whose root takes the mode of the image's
# directory (docker-verified.md §3), so it must be 1777 for uid 65534 to write there.
chmod 1777 "$ROOT/tmp" "$ROOT/var/tmp"
chown -R 0:0 "$ROOT$VENV"

# ---- pack and import ----------------------------------------------------------------------
log "packing the rootfs"
tar --numeric-owner --sort=name -C "$ROOT" -cf "$WORK/rootfs.tar" .
ROOTFS_BYTES=$(stat -c %s "$WORK/rootfs.tar")
log "importing as $IMAGE_REF with $ELENGTIS_BIN images import"
IMPORT_ENV=()
for kv in ${ELENGTIS_IMAGE_ENV:-}; do
    [[ $kv =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "ELENGTIS_IMAGE_ENV: KEY=VALUE expected, got '$kv'"
    IMPORT_ENV+=(--env "$kv")
done
"$ELENGTIS_BIN" images import --rootfs "$WORK/rootfs.tar" --tag "$IMAGE_REF" \
    --user "$UID_GID" --entrypoint "[\"$VENV/bin/python\",\"-m\",\"$MODULE\"]" \
    ${IMPORT_ENV[@]+"${IMPORT_ENV[@]}"}

echo "image: $IMAGE_REF"
echo "rootfs: $ROOTFS_BYTES bytes ($((ROOTFS_BYTES / 1048576)) MiB uncompressed tar)"
if command -v docker >/dev/null 2>&1 \
    && info=$(docker image inspect --format '{{.Id}} {{.Size}}' "$IMAGE_REF" 2>/dev/null); then
    echo "id: ${info% *}"
    echo "size: ${info#* } bytes ($((${info#* } / 1048576)) MiB)"
fi
echo "took: $((SECONDS - START)) s"
