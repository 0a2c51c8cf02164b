/* cli: checked parsing of command-line values, shared by every chapter program.
 *
 * Flags are GNU long options parsed with getopt_long in each main.c; these
 * helpers turn their text into numbers and reject junk ("--world=4x", "-3" for
 * an unsigned, overflow) with a message that names the flag. Sizes accept the
 * binary suffixes K, M, G (1K = 1024 bytes), as nccl-tests does.
 */
#ifndef DDP_CLI_H
#define DDP_CLI_H

#include <stdint.h>

/* Each returns 0, or ERR_ARG with err_msg() naming `flag` and the bad text. */
int cli_parse_u64(const char *flag, const char *text, uint64_t *out);
int cli_parse_i64(const char *flag, const char *text, int64_t *out);
int cli_parse_double(const char *flag, const char *text, double *out);
int cli_parse_bytes(const char *flag, const char *text, uint64_t *out);

/* Parses a Python-style integer seed: any value from -2^63 to 2^64-1, kept as
 * its 64-bit two's-complement pattern (so -1 and 2^64-1 give the same bits, as
 * they do for torch.Generator.manual_seed). */
int cli_parse_seed(const char *flag, const char *text, uint64_t *out);

/* Prints "PROG: <err_msg()>" and a hint to run --help on stderr; returns 2,
 * the exit status for a usage error, so callers write `return cli_fail(argv[0]);`. */
int cli_fail(const char *prog);

#endif
