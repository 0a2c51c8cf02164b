# make_clean: `make clean` removes build/ and what the chapters generated in
# notebooks-out/, keeps the committed notebooks-out/reference/, and works in a
# tree that has neither (a fresh clone). Run on a copy of the Makefile in a
# scratch tree, never on this checkout.
. "$(dirname "$0")/../harness/lib.sh"

tree=$T_TMP/tree
mkdir -p "$tree/build/obj" "$tree/notebooks-out/chapter-1" "$tree/notebooks-out/reference"
cp Makefile "$tree/"
touch "$tree/build/obj/x.o" "$tree/notebooks-out/chapter-1/plot.png" "$tree/notebooks-out/reference/kept.md"

t_ok removes_generated make -s -C "$tree" clean
if [ -e "$tree/build" ] || [ -e "$tree/notebooks-out/chapter-1" ]; then
    t_failed removes_build_and_plots "left: $(cd "$tree" && find build notebooks-out/chapter-1 2>/dev/null | head -n 3)"
else t_pass removes_build_and_plots; fi
if [ -e "$tree/notebooks-out/reference/kept.md" ]; then t_pass keeps_reference
else t_failed keeps_reference "notebooks-out/reference/kept.md was removed"; fi

rm -rf "$tree/notebooks-out"
t_ok fresh_clone make -s -C "$tree" clean
