/* error: per-thread error messages behind the ERR_* return codes (see error.h). */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ERR_MSG_MAX 1024

static _Thread_local char err_buf[ERR_MSG_MAX];

int err_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return code;
}

int err_wrap(int code, const char *fmt, ...)
{
    char old[ERR_MSG_MAX];
    memcpy(old, err_buf, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof err_buf)
        snprintf(err_buf + n, sizeof err_buf - (size_t)n, ": %s", old);
    return code;
}

const char *err_msg(void) { return err_buf; }

void err_clear(void) { err_buf[0] = '\0'; }

const char *err_name(int code)
{
    switch (code) {
    case 0: return "OK";
    case ERR_IO: return "ERR_IO";
    case ERR_FORMAT: return "ERR_FORMAT";
    case ERR_RANGE: return "ERR_RANGE";
    case ERR_NOMEM: return "ERR_NOMEM";
    case ERR_ARG: return "ERR_ARG";
    case ERR_TIMEOUT: return "ERR_TIMEOUT";
    case ERR_UNSUPPORTED: return "ERR_UNSUPPORTED";
    case ERR_STATE: return "ERR_STATE";
    case ERR_PEER: return "ERR_PEER";
    default: return code > 0 ? "OK" : "ERR_UNKNOWN";
    }
}
