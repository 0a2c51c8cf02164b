/* augment: reproducible augmentations (see augment.h). */
#include "loader/augment.h"

#include "base/error.h"

int augment_hflip_decision(uint64_t seed, double p)
{
    /* The top 53 bits as a double in [0, 1), as random.random() builds it. */
    return (double)(seed >> 11) * 0x1.0p-53 < p;
}

int augment_hflip(void *user, const struct loader_sample *s, void *data, uint64_t bytes)
{
    const struct augment_hflip *h = user;
    if (bytes != (uint64_t)h->rows * h->cols)
        return err_set(ERR_FORMAT, "hflip: sample %llu has %llu bytes, not a %ux%u image",
                       (unsigned long long)s->index, (unsigned long long)bytes, h->rows, h->cols);
    if (!augment_hflip_decision(s->seed, h->p))
        return 0;
    uint8_t *px = data;
    for (uint32_t r = 0; r < h->rows; r++) {
        uint8_t *row = px + (uint64_t)r * h->cols;
        for (uint32_t a = 0, b = h->cols; b > a + 1; a++, b--) { /* swap a and b - 1; cols 0 is no work */
            uint8_t t = row[a];
            row[a] = row[b - 1];
            row[b - 1] = t;
        }
    }
    return 0;
}
