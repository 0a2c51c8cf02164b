# make_vars: the Makefile's goals and variables as a user types them. A
# chapter that does not exist, or no number at all, is refused naming the
# chapters; an absolute BUILD runs its chapter programs from there.
. "$(dirname "$0")/../harness/lib.sh"

t_fail no_such_chapter 2 "make chapter-99: there is no chapter 99 (the chapters: 1 " make -s BUILD="$BUILD" chapter-99
t_fail chapter_without_a_number 2 "make chapter-N: N is a chapter's number" make -s BUILD="$BUILD" chapter-

t_out absolute_build_runs_its_chapter "usage: chapter-1 " make -s BUILD="$(cd "$BUILD" && pwd)" chapter-1 ARGS=--help
