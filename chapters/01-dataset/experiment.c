/* experiment: placeholder until the JSONL experiment lands (see experiment.h). */
#include "experiment.h"

#include "error.h"

int experiment_run(const struct experiment_options *opt)
{
    (void)opt;
    return err_set(ERR_UNSUPPORTED, "the JSONL experiment is not written yet");
}
