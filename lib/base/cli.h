/* cli: the command-line shape every program of the project has, and checked
 * parsing of flag values.
 *
 * Where it sits: at the top of every chapter program, before any stage runs.
 * Each main.c follows one shape: parse, validate, run.
 *
 *   --help            the usage text on stdout, exit 0
 *   a bad flag        one line on stderr, "chapter-N: --flag: what is wrong,
 *                     and the valid range or values", exit 2 (CLI_EXIT_USAGE)
 *   a runtime error   one line on stderr, "chapter-N: <what failed, where>",
 *                     exit 1 (CLI_EXIT_FAILED)
 *
 * Flags are GNU long options parsed with getopt_long (optstring ":", opterr
 * 0, so the messages are ours); the helpers below turn their text into values
 * and reject junk ("--world=4x", "-3" for an unsigned, " 4" with a space,
 * 2^64, a value outside its range, a name not in the list, an empty path)
 * with a message that names the flag and what it accepts. Every number a
 * program reads from its flags or its environment goes through them: no
 * strtoul, strtod or atoi of its own. Sizes accept the binary suffixes K, M,
 * G (1K = 1024 bytes), as nccl-tests does. tests/programs/program_shape.sh
 * checks the shape, and every numeric flag's bad values, of every program.
 *
 * Read cli_parse_range() and cli_fail() first.
 */
#ifndef DDP_CLI_H
#define DDP_CLI_H

#include <stddef.h>
#include <stdint.h>

/* A program's exit status: it ran, it failed at run time, it was called wrong. */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FAILED = 1, CLI_EXIT_USAGE = 2 };

/* Every parser below is strict, so that what the program runs with is what
 * the user typed: the whole text is the value (no leading or trailing space,
 * which strtoull and strtod would skip or stop at), an unsigned value has no
 * sign, and a value past the flag's range is refused, never capped to it.
 * Each returns 0, or ERR_ARG with err_msg() naming `flag` (without its "--"),
 * the bad text and what the flag accepts. */

/* An unsigned integer from min to max, in decimal digits only: ERR_ARG
 * "--FLAG: expected MIN to MAX, got 'TEXT'" otherwise (junk, a sign, a
 * space, a value past 2^64-1 or outside the range alike). */
int cli_parse_range(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* A finite decimal number ("5", "-0.25", "1e-3"; no hex, inf or nan) from
 * min to max, the same way; a '-' only where the range has negatives. A
 * subnormal ("1e-310") is taken as the double nearest it; a nonzero value
 * closer to 0 than any double ("1e-400") is refused, saying that it would be
 * read as 0. */
int cli_parse_double_range(const char *flag, const char *text, double min, double max, double *out);

/* Any finite decimal number, for a figure with no range of its own: ERR_ARG
 * "--FLAG: expected a finite number, got 'TEXT'". */
int cli_parse_double(const char *flag, const char *text, double *out);

/* A size in bytes from min to max: digits, then K, M or G (1K = 1024 bytes,
 * as nccl-tests reads them) and an optional B. ERR_ARG "--FLAG: expected a
 * size of MIN to MAX bytes, like 4096, 64K or 1G, got 'TEXT'" otherwise. */
int cli_parse_bytes(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* Parses a Python-style integer seed: any value from -2^63 to 2^64-1, kept as
 * its 64-bit two's-complement pattern (so -1 and 2^64-1 give the same bits, as
 * they do for torch.Generator.manual_seed). */
int cli_parse_seed(const char *flag, const char *text, uint64_t *out);

/* One of `names` (NULL-terminated): *index is its position. ERR_ARG
 * "--FLAG: unknown value 'TEXT' (a, b or c)" otherwise. */
int cli_parse_choice(const char *flag, const char *text, const char *const *names, int *index);

/* A comma-separated list of unsigned integers ("0,1,2"), each from min to
 * max, into out[0 .. most), *n of them. ERR_ARG naming the flag for an item
 * cli_parse_range() refuses (a space around a comma included), an empty item
 * ("1,,2", "1,", ""), or more than `most` items. */
int cli_parse_list(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out, int most, int *n);

/* A value that names something (a path, a directory, a field): anything but
 * the empty string. "--trace=" is a name forgotten, not a request for the
 * default: ERR_ARG "--FLAG: expected WHAT, got an empty value". */
int cli_parse_text(const char *flag, const char *text, const char *what, const char **out);

/* An environment variable a launcher or a harness sets, read as strictly as
 * a flag (" 3" is not 3): ERR_ARG "NAME='TEXT': expected MIN to MAX". The
 * caller reads the variable (and decides what unset means). */
int cli_parse_env(const char *name, const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* getopt_long's answer for an option it did not take (`c` is '?' or ':',
 * `arg` is argv[optind - 1], `longopts` the program's table): ERR_ARG
 * "unrecognized option '--frobnicate'", "option '--world' needs a value
 * (--world=VALUE)" or "option '--help' takes no value". Returns ERR_ARG. */
struct option;
int cli_getopt_error(int c, const char *arg, const struct option *longopts);

/* The flags a run was given, by their getopt value (below CLI_MAX_OPTION), so
 * that a program can refuse the ones the chosen mode would silently ignore
 * ("--memcpy does nothing without --bench"): a flag that changes nothing is
 * a typo or a misunderstanding, and the run would not be the one asked for. */
#define CLI_MAX_OPTION 512
struct cli_given {
    uint64_t bits[CLI_MAX_OPTION / 64];
};

/* Records that getopt_long returned `value`. */
void cli_given_add(struct cli_given *g, int value);

/* Whether `value` was given. */
int cli_given_has(const struct cli_given *g, int value);

/* The first of `values` (getopt values, ending with 0) that was given:
 * ERR_ARG "--NAME WHY" with NAME from `longopts` ("--out-of-order does
 * nothing without --bench"). 0 when none of them was given. */
int cli_refuse_given(const struct cli_given *g, const struct option *longopts, const int *values, const char *why);

/* rc, as a usage error (ERR_ARG, exit 2) when it is another error: what
 * checking the flags found wrong with what they name (an --out that is a
 * FIFO, a size past the machine's memory) is the flags' fault, whichever code
 * the check that found it returns. The message stays as it is. */
int cli_as_usage_error(int rc);

/* A usage error: prints "PROG: <err_msg()>" on one line of stderr and returns
 * CLI_EXIT_USAGE, so callers write `return cli_fail("chapter-2");`. PROG is
 * the program's name, not argv[0] (no "./build/" in messages). */
int cli_fail(const char *prog);

/* A runtime error: prints "PROG: <err_msg()>" on one line of stderr and
 * returns CLI_EXIT_FAILED. */
int cli_error(const char *prog);

/* A run's status once its output is out: `rc`, or ERR_IO ("writing the output
 * failed") when rc is 0 but standard output could not be written (a full
 * disk, a closed pipe): a report cut short is not a report. Call it last. */
int cli_stdout_status(int rc);

/* The same for an exit status: `status`, or cli_error(prog)'s when status is
 * CLI_EXIT_OK but standard output could not be written. For a main that
 * returns exit statuses from several places: `return cli_exit(PROG, status);`. */
int cli_exit(const char *prog, int status);

#endif
