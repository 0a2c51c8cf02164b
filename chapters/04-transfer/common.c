/* common: what every section of chapter 4 stands on (see chapter4.h): the
 * device the flags ask for, a gate that holds a stream so a measurement sees
 * the device rather than how fast this host issues work, and a section's
 * plot. main.c parses and dispatches; the sections (sweep.c,
 * pinning.c, loop.c, race.c, bench.c) call here, never back into main.c.
 */
#include "chapter4.h"

#include "base/error.h"
#include "base/plot.h"

#include <stdio.h>
#include <unistd.h>

int ch4_device_open(const struct ch4_opts *o, const struct link_profile *link, device_t **out)
{
    struct device_config cfg;
    device_config_default(&cfg);
    cfg.backend = o->backend;
    cfg.link = *link;
    return device_open(&cfg, out);
}

static int ch4_gate_open;

static void ch4_gate_fn(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&ch4_gate_open, __ATOMIC_ACQUIRE))
        usleep(100);
}

int ch4_gate_hold(device_stream_t *s)
{
    __atomic_store_n(&ch4_gate_open, 0, __ATOMIC_RELEASE);
    struct device_kernel gate = {.name = "gate", .batch = -1, .fn = ch4_gate_fn};
    return device_launch(s, &gate);
}

void ch4_gate_release(void) { __atomic_store_n(&ch4_gate_open, 1, __ATOMIC_RELEASE); }

/* Renders `script` over the CSV at csv_path into out_path.png and .svg, with
 * `title` when given, and says what it wrote; without gnuplot, says so and
 * goes on (0). */
int ch4_plot(const char *script, const char *csv_path, const char *out_path, const char *title)
{
    int rc = plot_render_titled(script, csv_path, out_path, title, "--out");
    if (rc == 0)
        printf("wrote %s.png and %s.svg\n", out_path, out_path);
    else if (rc == ERR_UNSUPPORTED)
        printf("(%s)\n", err_msg());
    return rc == ERR_UNSUPPORTED ? 0 : rc;
}
