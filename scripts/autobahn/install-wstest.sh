#!/usr/bin/env bash
# Install the Autobahn|Testsuite `wstest` tool (PyPI: autobahntestsuite 0.8.2,
# Python 2.7 only) on Debian 12 (bookworm), as root, reproducibly and
# idempotently, using only Debian's apt archive and PyPI.
#
# Usage: install-wstest.sh [PREFIX]      (default PREFIX: /opt/ark-autobahn)
#
# On success the last line printed on stdout is the absolute path of a working
# `wstest` executable ($PREFIX/venv/bin/wstest). All progress goes to stderr.
#
# How it works:
#   1. bookworm has no Python 2.7 (neither python2.7 nor a Python-2 pypy), so
#      CPython 2.7.18 is installed from Debian 11 (bullseye) main via a
#      temporary apt source pinned at priority 100 (it can never upgrade or
#      replace a bookworm package). The pulled-in packages are python2.7,
#      python2.7-dev and their bullseye-only libs (libssl1.1, libffi7); nothing
#      is removed or upgraded. The temporary source is removed afterwards
#      (set KEEP_BULLSEYE_SOURCE=1 to keep it).
#   2. A throw-away Python 3 venv ($PREFIX/bootstrap) gets virtualenv 20.21.1,
#      the last virtualenv that can create Python 2.7 environments; it seeds
#      pip 20.3.4 / setuptools 44.1.1 / wheel 0.37.1 from its bundled wheels.
#   3. `virtualenv -p python2.7 $PREFIX/venv`, then the fully pinned
#      requirement set below is installed from PyPI into it. Only wsaccel
#      (C sources shipped in the sdist) is compiled; the builds use the venv's
#      own pinned setuptools (--no-build-isolation), so no unpinned build
#      dependency is fetched.
#
# Re-running with the same PREFIX and an unchanged pin set is a no-op
# (apart from a quick self-check) and prints the same path.
set -euo pipefail

PREFIX="${1:-/opt/ark-autobahn}"
case "$PREFIX" in /*) ;; *) PREFIX="$(pwd)/$PREFIX" ;; esac
PREFIX="${PREFIX%/}"
VENV="$PREFIX/venv"
BOOT="$PREFIX/bootstrap"
WSTEST="$VENV/bin/wstest"
STAMP="$PREFIX/.install-stamp"
PY27="/usr/bin/python2.7"
VIRTUALENV_VERSION="20.21.1"

log() { printf '[install-wstest] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs python2.7 with apt-get)"

# Every Python 2.7 package, transitive dependencies included, pinned exactly.
# The direct pins follow the set the upstream maintainers ship with
# autobahntestsuite 25.10.1 (still Python-2-only), except setuptools (44.1.1,
# the last py2 release, which virtualenv seeds anyway).
read -r -d '' REQUIREMENTS <<'EOF' || true
autobahntestsuite==0.8.2
autobahn[accelerate,twisted]==0.10.9
txaio==2.1.0
Twisted==19.10.0
zope.interface==4.6.0
incremental==16.10.1
constantly==15.1.0
Automat==22.10.0
attrs==21.4.0
hyperlink==21.0.0
idna==2.10
PyHamcrest==1.10.1
typing==3.10.0.0
pyOpenSSL==19.1.0
cryptography==3.3.2
cffi==1.15.1
pycparser==2.21
enum34==1.1.10
ipaddress==1.0.23
service-identity==18.1.0
pyasn1==0.5.1
pyasn1-modules==0.3.0
klein==17.10.0
Werkzeug==1.0.1
Jinja2==2.11.3
MarkupSafe==1.1.1
unittest2==1.1.0
linecache2==1.0.0
traceback2==1.4.0
six==1.16.0
wsaccel==0.6.6
ujson==2.0.3
setuptools==44.1.1
EOF
STAMP_CONTENT="v1 virtualenv=$VIRTUALENV_VERSION
$REQUIREMENTS"

wstest_works() {
    [ -x "$WSTEST" ] || return 1
    "$VENV/bin/python" - <<'PY' >/dev/null 2>&1 || return 1
import warnings; warnings.simplefilter("ignore")
import autobahntestsuite, autobahn, twisted, wsaccel.utf8validator, wsaccel.xormask
from autobahntestsuite import wstest, fuzzing
assert autobahntestsuite.version == "0.8.2", autobahntestsuite.version
PY
    "$WSTEST" --autobahnversion >/dev/null 2>&1
}

# ---------------------------------------------------------------- fast path
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_CONTENT" ] && wstest_works; then
    log "already installed under $PREFIX"
    echo "$WSTEST"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive

# ------------------------------------------------- 1. Python 2.7 (via apt)
py27_ok() {
    [ -x "$PY27" ] && [ -f /usr/include/python2.7/Python.h ] &&
        "$PY27" -c 'import ssl, zlib, ctypes, sqlite3, bz2' >/dev/null 2>&1
}

# (not `apt-cache policy | grep -q`: with pipefail, grep's early exit can
# SIGPIPE apt-cache and turn a match into a failure)
py27_candidate() { apt-cache policy python2.7 2>/dev/null | sed -n 's/^ *Candidate: \([0-9].*\)/\1/p'; }

BULLSEYE_LIST=/etc/apt/sources.list.d/zz-ark-autobahn-bullseye.sources
BULLSEYE_PREF=/etc/apt/preferences.d/zz-ark-autobahn-bullseye.pref
cleanup_apt() {
    if [ "${KEEP_BULLSEYE_SOURCE:-0}" != 1 ]; then
        rm -f "$BULLSEYE_LIST" "$BULLSEYE_PREF"
    fi
}

if ! py27_ok; then
    pkgs="python2.7 python2.7-dev"
    command -v gcc >/dev/null 2>&1 || pkgs="$pkgs gcc libc6-dev"
    if [ -n "$(py27_candidate)" ]; then
        log "python2.7 already available from the configured apt sources"
        apt-get install -y --no-install-recommends $pkgs >&2
    else
        log "adding a temporary, low-priority Debian bullseye apt source for python2.7"
        trap cleanup_apt EXIT
        cat > "$BULLSEYE_LIST" <<'EOF'
# Added by install-wstest.sh (Autobahn|Testsuite needs Python 2.7, which
# bookworm no longer ships). Safe to delete once python2.7 is installed.
Types: deb
URIs: http://deb.debian.org/debian
Suites: bullseye
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
        cat > "$BULLSEYE_PREF" <<'EOF'
# Added by install-wstest.sh: never prefer bullseye over bookworm.
Package: *
Pin: release n=bullseye
Pin-Priority: 100
EOF
        apt-get update -qq >&2 || die "apt-get update failed"
        [ -n "$(py27_candidate)" ] ||
            die "python2.7 not reachable from Debian bullseye (deb.debian.org); no other source of Python 2.7 is known"
        apt-get install -y --no-install-recommends $pkgs >&2
        cleanup_apt
    fi
    py27_ok || die "python2.7 installed but not usable"
fi
log "python: $("$PY27" -V 2>&1)"
command -v gcc >/dev/null 2>&1 || apt-get install -y --no-install-recommends gcc libc6-dev >&2

# ------------------------------------ 2. bootstrap virtualenv (Python 3)
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
mkdir -p "$PREFIX"
if ! "$BOOT/bin/python" -c "import virtualenv, sys; sys.exit(virtualenv.__version__ != '$VIRTUALENV_VERSION')" >/dev/null 2>&1; then
    log "creating bootstrap venv with virtualenv==$VIRTUALENV_VERSION"
    PY3=""
    for c in /usr/bin/python3 python3; do
        if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import venv, ensurepip' >/dev/null 2>&1; then
            PY3="$(command -v "$c")"; break
        fi
    done
    if [ -z "$PY3" ]; then
        apt-get install -y --no-install-recommends python3 python3-venv >&2
        PY3=/usr/bin/python3
    fi
    rm -rf "$BOOT"
    "$PY3" -m venv "$BOOT"
    "$BOOT/bin/python" -m pip install -q --no-cache-dir "virtualenv==$VIRTUALENV_VERSION" >&2
fi

# ---------------------------------------- 3. the Python 2.7 environment
rm -f "$STAMP"
if ! "$VENV/bin/python" -c 'import sys; assert sys.version_info[:2] == (2, 7); import pip' >/dev/null 2>&1; then
    log "creating Python 2.7 virtualenv at $VENV"
    rm -rf "$VENV"
    "$BOOT/bin/virtualenv" --quiet --no-periodic-update \
        --app-data "$PREFIX/.virtualenv-app-data" \
        -p "$PY27" "$VENV" >&2
fi

printf '%s\n' "$REQUIREMENTS" > "$PREFIX/requirements-py27.txt"
log "installing pinned autobahntestsuite requirements (pip $("$VENV/bin/pip" --version 2>/dev/null | cut -d' ' -f2))"
# PYTHONWARNINGS silences pip 20.3's Python 2.7 deprecation banners.
PYTHONWARNINGS=ignore "$VENV/bin/pip" install --no-cache-dir --no-build-isolation \
    --progress-bar off -q -r "$PREFIX/requirements-py27.txt" >&2

# cryptography 3.3.2 prints a "Python 2 is no longer supported" warning on
# every wstest start; keep it out of wstest's output.
cat > "$VENV/lib/python2.7/site-packages/zz_ark_autobahn_quiet.pth" <<'EOF'
import warnings; warnings.filterwarnings("ignore", message=".*Python 2 is no longer supported.*")
EOF

wstest_works || die "wstest self-check failed ($WSTEST)"
printf '%s' "$STAMP_CONTENT" > "$STAMP"
log "done: $("$WSTEST" --autobahnversion 2>&1 | tr '\n' ' ')"
echo "$WSTEST"
