#!/bin/sh
# deps.sh: installs the Debian/Ubuntu packages the project uses, before the
# first build (`make deps`; `make demo` and `make test` run it first). The next
# step, mk/features.sh, detects what the build can use; this one makes sure it
# is there.
#
#   sh mk/deps.sh [--quiet]      DEPS=all (default) | required | none
#
# Installs with apt-get when run as root, with `sudo -n apt-get` when sudo
# needs no password; otherwise a missing required package stops it with the
# exact command to run, and a missing optional one is reported with what its
# absence turns off. DEPS=required installs only the required packages,
# DEPS=none installs nothing (it still stops on a missing required one).
# Quick when all is there: one dpkg-query, no network. `apt-get update` runs
# only when apt has no package lists yet or an install failed on stale ones.
# --quiet prints nothing when there is nothing to do.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
quiet=0; [ "${1:-}" = --quiet ] && quiet=1
mode=${DEPS:-all}
case $mode in all|required|none) ;; *) echo "deps: DEPS=$mode: expected all, required or none" >&2; exit 2 ;; esac
BUILD=${BUILD:-build}

# What the build needs. A C compiler is only asked for when $CC (or cc) is
# not there already: a clang or a compiler of one's own does as well.
required="make zlib1g-dev libjansson-dev libopenblas-dev"
command -v "${CC:-cc}" >/dev/null 2>&1 || required="gcc libc6-dev $required"
# What each optional package turns on, as "package|what its absence turns off".
optional_table="openmpi-bin|--backend=mpi, the mpirun tests and the Open MPI benchmark
libopenmpi-dev|--backend=mpi, the mpirun tests and the Open MPI benchmark
gnuplot-nox|the plots (CSV is still written)
python3-torch|the PyTorch cross-checks and benchmarks, torchrun
iproute2|tests/mpi/two_nodes.sh (two network namespaces as two nodes)
nftables|tests/mpi/two_nodes.sh's firewall demo (a DROP rule on the rendezvous port)
clang|make fuzz (libFuzzer)
libclang-rt-14-dev|make fuzz (libFuzzer)
dataset-fashion-mnist|the real Fashion-MNIST (the chapters use a synthetic set of the same shape)"
optional=$(printf '%s\n' "$optional_table" | cut -d'|' -f1 | tr '\n' ' ')
turns_off() { printf '%s\n' "$optional_table" | awk -F'|' -v p="$1" '$1 == p { print $2 }'; }

say() { [ $quiet = 1 ] || echo "deps: $*"; }
warn() { echo "deps: $*" >&2; }

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    say "not a Debian or Ubuntu system (no apt-get): install the equivalents of"
    say "  $required (required) and $optional (optional) yourself"
    exit 0   # mk/features.sh still stops the build on a missing requirement
fi

not_installed() { # packages... -> the ones dpkg does not list as installed
    installed=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "$@" 2>/dev/null | awk '$1 == "ii" { print $2 }')
    for p in "$@"; do printf '%s\n' "$installed" | grep -qx -- "$p" || printf '%s ' "$p"; done
}
missing_required=$(not_installed $required)
missing_optional=""
[ "$mode" = all ] && missing_optional=$(not_installed $optional)
if [ -z "$missing_required" ] && [ -z "$missing_optional" ]; then
    say "every package is installed"
    exit 0
fi

# How to install: as root, or through sudo when it asks for no password.
if [ "$(id -u)" = 0 ]; then apt="apt-get"
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then apt="sudo -n apt-get"
else apt=""; fi
[ "$mode" = none ] && apt=""

if [ -z "$apt" ]; then
    for p in $missing_optional; do warn "optional $p is not installed: off: $(turns_off "$p")"; done
    [ -z "$missing_optional" ] ||
        warn "to install the optional ones: sudo apt-get install --no-install-recommends $missing_optional"
    if [ -n "$missing_required" ]; then
        why="not root, and sudo asks for a password"
        [ "$mode" = none ] && why="DEPS=none"
        warn "required packages are missing ($why). Install them with:"
        warn "  sudo apt-get install --no-install-recommends $missing_required"
        exit 1
    fi
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
updated=0
apt_update() { echo "deps: $apt update" >&2; $apt -q update >&2 && updated=1; }
has_candidate() { # package: apt knows a version of it to install
    apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { found = ($2 != "(none)") } END { exit !found }'
}
# A fresh container has no package lists at all: fetch them once.
lists=/var/lib/apt/lists/
eval "$(apt-config shell lists Dir::State::lists/d 2>/dev/null)"
ls "$lists"*_Packages* >/dev/null 2>&1 || apt_update
for p in $missing_required; do
    has_candidate "$p" && continue
    [ $updated = 1 ] || apt_update
    has_candidate "$p" || { warn "required package $p is not in this system's apt sources"; exit 1; }
done
install_optional=""
for p in $missing_optional; do
    if has_candidate "$p"; then install_optional="$install_optional $p"
    else warn "optional $p is not in this system's apt sources: off: $(turns_off "$p")"; fi
done
install() { # packages...: installs them, fetching the package lists again once if that fails
    echo "deps: $apt install $*" >&2
    $apt -q install -y --no-install-recommends -o DPkg::Lock::Timeout=120 "$@" >&2 && return 0
    [ $updated = 0 ] && apt_update && $apt -q install -y --no-install-recommends -o DPkg::Lock::Timeout=120 "$@" >&2
}
if [ -n "$missing_required" ] && ! install $missing_required; then
    warn "could not install the required packages (see apt-get's message above). The command was:"
    warn "  $apt install --no-install-recommends $missing_required"
    exit 1
fi
if [ -n "$install_optional" ] && ! install $install_optional; then
    warn "could not install the optional packages (see apt-get's message above); carrying on without them."
    for p in $install_optional; do warn "  $p: off: $(turns_off "$p")"; done
fi
# The build detects its features once per build directory: detect them again.
find "$BUILD" -maxdepth 2 -name config.mk -delete 2>/dev/null
say "installed; mk/features.sh will detect features again"
exit 0
