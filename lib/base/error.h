/* error: how every module reports failure.
 *
 * Where it sits: under everything. A public function returns 0 (or a count) on
 * success and a negative ERR_* code on failure, and leaves a message that names
 * the thing at fault (file, byte offset, sample index, rank, collective number).
 * The message is per thread, so rank threads and loader workers never overwrite
 * each other's. Programs print it with err_msg() and exit non-zero.
 */
#ifndef DDP_ERROR_H
#define DDP_ERROR_H

enum err_code {
    ERR_IO = -1,          /* open/read/write/mmap failed */
    ERR_FORMAT = -2,      /* bad magic, truncated file, malformed record */
    ERR_RANGE = -3,       /* index or size out of range */
    ERR_NOMEM = -4,       /* allocation failed */
    ERR_ARG = -5,         /* bad argument or command-line value */
    ERR_TIMEOUT = -6,     /* something we waited for never came */
    ERR_UNSUPPORTED = -7, /* feature not built in, or not written yet (labs) */
    ERR_STATE = -8,       /* call out of order, object already stopped */
    ERR_PEER = -9,        /* another rank or worker failed first */
};

/* Sets this thread's message from a printf format and returns `code`, so a
 * failure site reads: return err_set(ERR_FORMAT, "%s: byte %zu: ...", ...). */
int err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends context to the current message ("loading batch 7: <old message>")
 * and returns `code`. */
int err_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* This thread's last message; "" when none was set. Never NULL. */
const char *err_msg(void);

/* Forgets this thread's message. */
void err_clear(void);

/* The symbolic name of a code ("ERR_FORMAT"), for tests and logs. */
const char *err_name(int code);

#endif
