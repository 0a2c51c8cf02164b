/* test_cache_dir: lib/cache_dir follows its one rule ($DDP_CACHE_DIR, then an
 * absolute $XDG_CACHE_HOME, then $HOME/.cache, then /tmp/ddp-datapath-<uid>)
 * and creates what it names. */
#include "dataset/cache_dir.h"
#include "check.h"
#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void set(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static void env3(const char *ddp, const char *xdg, const char *home)
{
    set("DDP_CACHE_DIR", ddp);
    set("XDG_CACHE_HOME", xdg);
    set("HOME", home);
}

TEST(cache_dir_rule_in_order)
{
    char buf[4096], want[4200];
    env3("/d/ddp", "/x", "/h");
    CHECK_OK(cache_dir_path(buf, sizeof buf));
    CHECK_STR(buf, "/d/ddp");
    env3("", "/x", "/h"); /* empty is unset */
    CHECK_OK(cache_dir_path(buf, sizeof buf));
    CHECK_STR(buf, "/x/ddp-datapath");
    env3(NULL, "relative/x", "/h"); /* XDG: a relative path is invalid, ignored */
    CHECK_OK(cache_dir_path(buf, sizeof buf));
    CHECK_STR(buf, "/h/.cache/ddp-datapath");
    env3(NULL, NULL, "");
    CHECK_OK(cache_dir_path(buf, sizeof buf));
    snprintf(want, sizeof want, "/tmp/ddp-datapath-%lu", (unsigned long)getuid());
    CHECK_STR(buf, want);
}

TEST(cache_dir_too_long_is_an_error)
{
    char buf[8];
    env3("/a/long/cache/directory", NULL, NULL);
    CHECK_ERR(cache_dir_path(buf, sizeof buf), ERR_ARG, "too long");
    CHECK_ERR(cache_dir_create(buf, sizeof buf), ERR_ARG, "too long");
}

TEST(cache_dir_create_makes_the_parents)
{
    char home[4096], buf[4096], want[4200];
    snprintf(home, sizeof home, "%s/home", check_tmpdir());
    env3(NULL, NULL, home);
    CHECK_OK(cache_dir_create(buf, sizeof buf));
    snprintf(want, sizeof want, "%s/.cache/ddp-datapath", home);
    CHECK_STR(buf, want);
    struct stat st;
    CHECK_EQ(stat(want, &st), 0);
    CHECK(S_ISDIR(st.st_mode));
    CHECK_OK(cache_dir_create(buf, sizeof buf)); /* already there: fine */
}

TEST(cache_dir_create_fails_with_the_directory_named)
{
    char file[4096], ddp[4200], buf[4200];
    snprintf(file, sizeof file, "%s/a_file", check_tmpdir());
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    fclose(f);
    snprintf(ddp, sizeof ddp, "%s/cache", file); /* under a regular file: impossible */
    env3(ddp, NULL, NULL);
    CHECK_ERR(cache_dir_create(buf, sizeof buf), ERR_IO, "a_file");
}
