# stopped_rank.sh: the few-run form of tests/stress/stopped_rank.sh (`make
# stress` runs fifty, under load): one run per moment a rank is stopped at,
# with no CPU hog beside it. Each must end within the watchdog's timeout plus
# its margin, naming the stopped rank.
RUNS=${RUNS:-4} LOAD=${LOAD:-0} exec bash "$(dirname "$0")/../stress/stopped_rank.sh"
