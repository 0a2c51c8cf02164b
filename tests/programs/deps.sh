# deps: mk/deps.sh (`make deps`, run first by `make demo` and `make test`)
# against stand-ins for dpkg-query, apt-get, apt-cache, apt-config, id and
# sudo that keep a list of installed packages and log every call: nothing
# is installed on this machine. Checks that a complete machine costs no apt
# call at all, that root installs, that sudo is used only when it asks for no
# password, that without either the exact command is printed, that package
# lists are fetched only when there are none or an install failed, and that
# features are detected again after an install.
. "$(dirname "$0")/../harness/lib.sh"

stub=$T_TMP/stub
bin=$stub/bin
mkdir -p "$bin" "$stub/lists" "$stub/build/asan"
# dpkg-query -W -f=FORMAT PKG...: "ii NAME" for each installed one
cat > "$bin/dpkg-query" <<'EOF'
#!/bin/sh
shift 2
for p in "$@"; do grep -qx "$p" "$STUB/installed" && echo "ii  $p"; done
exit 0
EOF
# apt-get [-q] update | install ...: logged; install fails while $STUB/fail-install exists
# (an update removes it, as fresh lists would), else marks the packages installed
cat > "$bin/apt-get" <<'EOF'
#!/bin/sh
echo "apt-get $*" >> "$STUB/calls"
for a in "$@"; do
    case $a in
    update) rm -f "$STUB/fail-install"; touch "$STUB/lists/x_Packages"; exit 0 ;;
    install) install=1 ;;
    -*) ;;
    *) [ -n "${install:-}" ] && [ "$a" != "DPkg::Lock::Timeout=120" ] && pkgs="${pkgs:-} $a" ;;
    esac
done
[ -e "$STUB/fail-install" ] && { echo "E: Unable to fetch some archives" >&2; exit 100; }
for p in $pkgs; do echo "$p" >> "$STUB/installed"; done
EOF
# apt-cache policy PKG: a candidate when PKG is in $STUB/available
cat > "$bin/apt-cache" <<'EOF'
#!/bin/sh
echo "$2:"
if grep -qx "$2" "$STUB/available"; then echo "  Candidate: 1.0"; else echo "  Candidate: (none)"; fi
EOF
cat > "$bin/apt-config" <<'EOF'
#!/bin/sh
echo "lists='$STUB/lists/'"
EOF
cat > "$bin/id" <<'EOF'
#!/bin/sh
echo "${STUB_UID:-0}"
EOF
# sudo [-n] CMD...: logged (but for the probe `sudo -n true`); runs CMD when
# $STUB_SUDO is "nopasswd", else fails as sudo -n does (a sudo without -n
# would wait for a password: that is the case to catch)
cat > "$bin/sudo" <<'EOF'
#!/bin/sh
[ "$*" = "-n true" ] || echo "sudo $*" >> "$STUB/calls"
[ "$1" = -n ] && shift
[ "${STUB_SUDO:-}" = nopasswd ] || { echo "sudo: a password is required" >&2; exit 1; }
exec "$@"
EOF
chmod +x "$bin"/*

required="make zlib1g-dev libjansson-dev libopenblas-dev"
optional="openmpi-bin libopenmpi-dev gnuplot-nox python3-torch iproute2 nftables clang libclang-rt-14-dev dataset-fashion-mnist"
# a fresh scenario: installed and available packages, lists present or not
scenario() { # installed available lists(yes|no)
    rm -f "$stub/calls" "$stub/fail-install" "$stub/lists/"*
    printf '%s\n' $1 > "$stub/installed"
    printf '%s\n' $2 > "$stub/available"
    [ "$3" = yes ] && touch "$stub/lists/deb_Packages"
    touch "$stub/build/config.mk" "$stub/build/asan/config.mk"
    : > "$stub/calls"
}
deps() { # VAR=value... (then runs mk/deps.sh --quiet)
    t_run env PATH="$bin:$PATH" STUB="$stub" BUILD="$stub/build" CC=cc "$@" sh mk/deps.sh --quiet
}
calls() { cat "$stub/calls"; }
check() { # name condition-text condition...
    local name=$1 what=$2; shift 2
    if "$@"; then t_pass "$name"; else t_failed "$name" "$what; exit $T_STATUS; calls: $(calls | tr '\n' ';'); output: $(tail -n 4 <<<"$T_OUT")"; fi
}

scenario "$required $optional" "$required $optional" yes
deps
check all_there_costs_nothing "expected exit 0, no output, no apt call" \
    test "$T_STATUS" = 0 -a -z "$T_OUT" -a ! -s "$stub/calls"

scenario "make" "$required $optional" yes
deps
check root_installs "expected apt-get install of the required, then the optional packages, no update" \
    test "$T_STATUS" = 0 -a "$(grep -c ' install ' "$stub/calls")" = 2 -a "$(grep -c update "$stub/calls")" = 0
check root_installs_the_named_packages "expected libjansson-dev and gnuplot-nox installed" \
    grep -qx gnuplot-nox "$stub/installed"
check features_detected_again "expected build/config.mk and build/asan/config.mk removed" \
    test ! -e "$stub/build/config.mk" -a ! -e "$stub/build/asan/config.mk"

scenario "make" "$required $optional" no
deps
check fresh_container_updates_once "expected one apt-get update before installing" \
    test "$T_STATUS" = 0 -a "$(grep -c update "$stub/calls")" = 1 -a "$(head -n 1 "$stub/calls")" = "apt-get -q update"

scenario "make" "$required $optional" yes
touch "$stub/fail-install"
deps
check stale_lists_update_and_retry "expected a failed install, one update, then success" \
    test "$T_STATUS" = 0 -a "$(grep -c update "$stub/calls")" = 1 -a "$(grep -c ' install ' "$stub/calls")" = 3

scenario "make" "$required" yes
deps STUB_UID=1000 STUB_SUDO=nopasswd
check sudo_without_password "expected sudo -n apt-get install" \
    grep -q "^sudo -n apt-get -q install" "$stub/calls"

scenario "make $optional" "$required $optional" yes
deps STUB_UID=1000
check no_way_to_install_stops "expected exit 1 naming the command, no apt call" \
    test "$T_STATUS" = 1 -a ! -s "$stub/calls"
check no_way_to_install_names_the_command "expected the exact command" \
    grep -qF "sudo apt-get install --no-install-recommends zlib1g-dev libjansson-dev libopenblas-dev" <<<"$T_OUT"

scenario "$required" "$required $optional" yes
deps STUB_UID=1000
check optional_missing_is_said "expected exit 0 and what gnuplot-nox turns off" \
    eval 'test "$T_STATUS" = 0 && grep -qF "optional gnuplot-nox is not installed: off: the plots" <<<"$T_OUT"'

scenario "$required" "$required" yes
deps
check unavailable_optional_no_update "expected exit 0, no update, 'not in this system's apt sources'" \
    eval 'test "$T_STATUS" = 0 -a "$(grep -c update "$stub/calls")" = 0 && grep -qF "libclang-rt-14-dev is not in this system" <<<"$T_OUT"'

scenario "make" "$required $optional" yes
deps DEPS=required
check deps_required_skips_optional "expected the required packages only" \
    eval 'test "$T_STATUS" = 0 -a "$(grep -c " install " "$stub/calls")" = 1 && ! grep -q gnuplot "$stub/calls"'

scenario "make" "$required $optional" yes
deps DEPS=none
check deps_none_installs_nothing "expected exit 1, the command, no apt call" \
    eval 'test "$T_STATUS" = 1 -a ! -s "$stub/calls" && grep -qF "apt-get install" <<<"$T_OUT"'

t_fail bad_deps_value 2 "DEPS=sometimes" env DEPS=sometimes sh mk/deps.sh
