# make_clean: `make clean` removes build/ (the programs' own outputs in
# build/out/ and build/bench/ with it) and what notebooks-out/ does not keep
# (the PNG copies, temporary files, a trace), keeps what the repository keeps
# there (the report page, its SVG plots, their CSV and provenance, the last
# bench output, reference/), and works in a tree that has neither (a fresh
# clone). Run on a copy of the Makefile in a scratch tree, never on this
# checkout. (tests/programs/readme_commands.sh checks that it removes whatever
# the READMEs' commands make.)
. "$(dirname "$0")/../harness/lib.sh"

tree=$T_TMP/tree
n=$tree/notebooks-out
mkdir -p "$tree/build/obj" "$tree/build/out/chapter-2" "$tree/build/bench" "$n/chapter-1" "$n/chapter-3" \
    "$n/reference/h100" "$n/bench"
cp Makefile "$tree/"
kept=(README.md reference/kept.md reference/h100/run.txt bench/last-run.txt chapter-3/sweep.svg chapter-3/sweep.csv
      chapter-3/provenance.txt)
gone=(chapter-1/plot.png chapter-3/sweep.png chapter-3/trace.json bench/last-run.txt.tmp-1234 chapter-3/notes.txt)
touch "$tree/build/obj/x.o" "$tree/build/out/chapter-2/padding.svg" "$tree/build/bench/last-run.txt"
for f in "${kept[@]}" "${gone[@]}"; do touch "$n/$f"; done

t_ok removes_generated make -s -C "$tree" clean
left=$(cd "$tree" && for f in "${gone[@]}"; do [ -e "notebooks-out/$f" ] && echo "$f"; done; find build 2>/dev/null | head -n 2)
if [ -n "$left" ] || [ -e "$n/chapter-1" ]; then t_failed removes_build_and_plots "left: $left"
else t_pass removes_build_and_plots; fi
missing=$(for f in "${kept[@]}"; do [ -e "$n/$f" ] || echo "$f"; done)
if [ -z "$missing" ]; then t_pass keeps_what_the_repository_keeps
else t_failed keeps_what_the_repository_keeps "removed: $missing"; fi

rm -rf "$tree/notebooks-out"
t_ok fresh_clone make -s -C "$tree" clean

# .gitignore keeps out exactly what make clean removes (the two lists agree).
if git rev-parse --git-dir >/dev/null 2>&1; then
    wrong=$(for f in "${kept[@]}"; do git check-ignore -q --no-index "notebooks-out/$f" && echo "$f is ignored"; done
            for f in "${gone[@]}"; do git check-ignore -q --no-index "notebooks-out/$f" || echo "$f is not ignored"; done)
    if [ -z "$wrong" ]; then t_pass gitignore_agrees
    else t_failed gitignore_agrees "$(tr '\n' ' ' <<<"$wrong")"; fi
else
    t_skip gitignore_agrees "not a git checkout"
fi
