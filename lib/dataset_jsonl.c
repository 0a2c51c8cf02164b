/* dataset_jsonl: placeholder until the jsonl format lands (chapter 1). */
#include "dataset_impl.h"

#include "error.h"

int dataset_jsonl_open(const char *path, const struct dataset_options *opt, dataset_t **out)
{
    (void)opt;
    *out = 0;
    return err_set(ERR_UNSUPPORTED, "%s: the jsonl format is not built yet", path);
}
