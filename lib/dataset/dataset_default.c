/* dataset_default: Fashion-MNIST when installed, else its synthetic twin
 * (see dataset_default.h). */
#include "dataset/dataset_default.h"

#include "base/error.h"

#include <stdio.h>
#include <unistd.h>

const char *dataset_default_path(void)
{
    return access(DATASET_DEFAULT_PATH, R_OK) == 0 ? DATASET_DEFAULT_PATH : NULL;
}

int dataset_open_default(const struct dataset_options *opt, dataset_t **out, char *why, size_t why_len)
{
    char reason[600] = "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
    if (dataset_default_path()) {
        if (dataset_open(DATASET_DEFAULT_PATH, opt, out) == 0) {
            if (why)
                snprintf(why, why_len, "Fashion-MNIST's training set, the default");
            return 0;
        }
        snprintf(reason, sizeof reason, "Fashion-MNIST did not open (%s)", err_msg());
    }
    if (why)
        snprintf(why, why_len, "the default: %s, so a synthetic dataset of its shape stands in", reason);
    return dataset_open("synthetic", opt, out);
}
