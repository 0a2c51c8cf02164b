# make_vars: the Makefile's goals and variables as a user types them: an
# absolute BUILD runs its chapter programs from there.
. "$(dirname "$0")/../harness/lib.sh"

t_out absolute_build_runs_its_chapter "usage: chapter-1 " make -s BUILD="$(cd "$BUILD" && pwd)" chapter-1 ARGS=--help
