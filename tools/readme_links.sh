#!/usr/bin/env bash
# readme_links.sh: every relative link and image of the repository's READMEs
# (each README.md outside build/ and .git/, the report's page included),
# resolved from the README's folder to a path from the repository root, one
# a line:
#
#   README:LINE<TAB>PATH    chapters/06-ddp/README.md:499<TAB>notebooks-out/chapter-6/accuracy.svg
#
# Every link of a line counts, not only the last. Links to web pages and to
# the page's own anchors are left out; an anchor or a title after a path is
# dropped. `make report` (tools/report.sh) reads it to refuse a run that would
# take away a figure a lesson shows, and tests/programs/report.sh to check
# that every link leads to a file the repository keeps.
#
#   tools/readme_links.sh [DIR]    the tree to read (default: this repository)
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "${1:-$(dirname "$0")/..}"
find . -name README.md -not -path './build/*' -not -path './.git/*' | sed 's|^\./||' | sort |
while IFS= read -r readme; do
    grep -noE '\]\([^)]*\)' "$readme" | while IFS= read -r hit; do
        line=${hit%%:*} link=${hit#*:](}
        link=${link%)} link=${link%% *} link=${link%%#*}
        [ -n "$link" ] && [[ ! $link =~ ^[a-z][a-z0-9+.-]*: ]] || continue
        printf '%s:%s\t%s\n' "$readme" "$line" "$(realpath -m -s --relative-to=. "$(dirname "$readme")/$link")"
    done || true # grep: a README without links
done
