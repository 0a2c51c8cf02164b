/* lab_todo: what an unwritten exercise region does in a lab's learner file.
 *
 * labs/labgen.awk replaces each LAB region of a reference module with its stub,
 * which calls LAB_TODO("region"). It prints where to look and returns
 * ERR_UNSUPPORTED, so the grader shows a clear reason instead of a wrong answer.
 */
#ifndef DDP_LAB_TODO_H
#define DDP_LAB_TODO_H

#include "base/error.h"

#include <stdio.h>
#include <string.h>

static inline int lab_todo(const char *file, int line, const char *region)
{
    const char *slash = strrchr(file, '/'); /* the lab's README sits beside its learner file */
    int dir_len = slash ? (int)(slash - file) + 1 : 0;
    fprintf(stderr, "LAB_TODO: region '%s' is not written yet (%s:%d); see %.*sREADME.md\n", region, file,
            line, dir_len, file);
    return err_set(ERR_UNSUPPORTED, "lab region '%s' is not written yet", region);
}

#define LAB_TODO(region) lab_todo(__FILE__, __LINE__, region)

#endif
