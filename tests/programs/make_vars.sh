# make_vars: the Makefile's goals and variables as a user types them. A
# chapter that does not exist, or no number at all, is refused naming the
# chapters; an absolute BUILD runs its chapter programs from there; a BUILD
# with a space (or none) stops before anything is written, in a scratch tree;
# CFLAGS and CPPFLAGS on the command line add to the flags the build needs
# (-Ilib, -std=c11, the dependency files, SAN's) instead of replacing them
# (make -n: the compile is printed, not run); clean given with other goals
# runs first, alone.
. "$(dirname "$0")/../harness/lib.sh"

t_fail no_such_chapter 2 "make chapter-99: there is no chapter 99 (the chapters: 1 " make -s BUILD="$BUILD" chapter-99
t_fail chapter_without_a_number 2 "make chapter-N: N is a chapter's number" make -s BUILD="$BUILD" chapter-

t_out absolute_build_runs_its_chapter "usage: chapter-1 " make -s BUILD="$(cd "$BUILD" && pwd)" chapter-1 ARGS=--help

tree=$T_TMP/tree
mkdir -p "$tree" && cp -r Makefile mk "$tree/"
t_fail build_with_a_space 2 "BUILD='my build': the build folder must be one path, without spaces" \
    make -s -C "$tree" "BUILD=my build" all
t_fail build_empty 2 "BUILD='': the build folder must be one path" make -s -C "$tree" BUILD= all
left=$(cd "$tree" && ls -A | grep -vxE 'Makefile|mk' || true)
if [ -z "$left" ]; then t_pass refused_build_writes_nothing
else t_failed refused_build_writes_nothing "left in the tree: $(tr '\n' ' ' <<<"$left")"; fi
# clean with other goals runs first and alone: under -j2, all found build/ up to date while clean removed it
if make -n -p -C "$tree" clean all 2>/dev/null | grep -q '^\.NOTPARALLEL'; then t_pass clean_with_goals_runs_alone
else t_failed clean_with_goals_runs_alone "make clean all would run its goals in parallel"; fi
if make -n -p -C "$tree" all 2>/dev/null | grep -q '^\.NOTPARALLEL'; then t_failed all_alone_stays_parallel "make all was made serial"
else t_pass all_alone_stays_parallel; fi

obj=$BUILD/obj/lib/base/error.o
t_out command_line_flags_add "-DMAKE_VARS_PROBE" \
    make -n -W lib/base/error.c BUILD="$BUILD" CFLAGS=-O1 CPPFLAGS=-DMAKE_VARS_PROBE SAN=address "$obj"
for flag in -Ilib -std=c11 -MMD -fsanitize=address -O1; do
    t_said "command_line_flags_keep_$flag" " $flag "
done
