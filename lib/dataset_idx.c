/* dataset_idx: placeholder until the idx format lands (chapter 1). */
#include "dataset_impl.h"

#include "error.h"

int dataset_idx_open(const char *path, const struct dataset_options *opt, dataset_t **out)
{
    (void)opt;
    *out = 0;
    return err_set(ERR_UNSUPPORTED, "%s: the idx format is not built yet", path);
}
