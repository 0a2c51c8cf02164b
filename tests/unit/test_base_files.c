/* test_base_files: lib/base/fsutil, lib/base/plot's files, lib/base/mapfile
 * and lib/base/measure keep their contracts. An atomic write leaves the final
 * file or nothing (never a *.tmp-* beside it), a failed write leaves the old
 * file as it was, a signal that ends the writer (SIGINT, SIGTERM, a CPU-time
 * limit's SIGXCPU, ...) mid-write or an exit() removes the temporary file, and the next writer (or a reader that sweeps)
 * removes those a SIGKILL left, never a live process's; a device, a FIFO, a
 * socket, a directory or a dangling link is refused as an output, naming the
 * flag, and left as it was, at the open and again at the rename; an input is
 * opened without ever blocking and refused unless a regular file; a file-size
 * limit is an error that says so, not a SIGXFSZ death; a CSV and the pictures
 * gnuplot writes go through temporary files the same way, and gnuplot's
 * command line is bounded, refusing what does not fit; sizes that cannot
 * fit are refused before writing; mkdir -p makes every parent and refuses a
 * component that is not a directory; a mapped file truncated under a reader
 * is named; a child's result, message and peak RSS come back, and a child
 * that dies is named as dead. */
#include "check.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "base/mapfile.h"
#include "base/plot.h"
#include "isolate.h"
#include "base/measure.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* Number of entries in dir whose name contains ".tmp-". */
static int count_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, ".tmp-") != NULL;
    if (d)
        closedir(d);
    return n;
}

static void read_text(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    CHECK_MSG(f, "%s: cannot open", path);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* The name of a temporary file of `final` as a process `pid` of this host
 * would make it: the same as ours, with our pid replaced. */
static void tmp_name_of(const char *ours, pid_t pid, char *out, size_t cap)
{
    char mine[32];
    snprintf(mine, sizeof mine, "-%ld-", (long)getpid());
    const char *at = strstr(ours, mine);
    CHECK_MSG(at != NULL, "%s does not hold our pid", ours);
    snprintf(out, cap, "%.*s-%ld-%s", (int)(at - ours), ours, (long)pid, at + strlen(mine));
}

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "cannot create %s", path);
    fclose(f);
}

TEST(fsutil_mkdir_p_makes_parents)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/a/b/c", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_OK(fsutil_mkdir_p(dir)); /* existing: fine */
}

TEST(fsutil_atomic_write_replaces_and_leaves_no_tmp)
{
    char path[512], text[64];
    snprintf(path, sizeof path, "%s/out.txt", check_tmpdir());
    for (int round = 0; round < 2; round++) {
        struct fsutil_tmp t;
        CHECK_OK(fsutil_tmp_open(&t, path, NULL));
        const char *body = round ? "second\n" : "first\n";
        CHECK_OK(fsutil_tmp_finish(&t, fsutil_write_all(t.fd, body, strlen(body), t.path), FSUTIL_DURABLE));
        read_text(path, text, sizeof text);
        CHECK_STR(text, body);
    }
    struct stat st;
    CHECK(stat(path, &st) == 0);
    CHECK_EQ(st.st_mode & 0777, 0644);
    CHECK_EQ(count_tmp(check_tmpdir()), 0);
}

TEST(fsutil_failed_write_keeps_the_old_file)
{
    char path[512], text[64];
    snprintf(path, sizeof path, "%s/keep.txt", check_tmpdir());
    struct fsutil_tmp t;
    CHECK_OK(fsutil_tmp_open(&t, path, NULL));
    CHECK_OK(fsutil_tmp_finish(&t, fsutil_write_all(t.fd, "old\n", 4, t.path), 0));
    CHECK_OK(fsutil_tmp_open(&t, path, NULL));
    CHECK_OK(fsutil_write_all(t.fd, "half", 4, t.path));
    CHECK_EQ(fsutil_tmp_finish(&t, err_set(ERR_FORMAT, "the writer failed"), 0), ERR_FORMAT);
    read_text(path, text, sizeof text);
    CHECK_STR(text, "old\n");
    CHECK_EQ(count_tmp(check_tmpdir()), 0);
}

TEST(fsutil_unwritable_directory_is_named)
{
    CHECK_ERR(({
                  struct fsutil_tmp t;
                  fsutil_tmp_open(&t, "/proc/no-such-dir/file", NULL);
              }),
              ERR_IO, "/proc/no-such-dir/file");
}

/* A child opens a temporary file, writes, tells us, and waits; we send `sig`.
 * The child must die of that signal, as it would have, and leave no file. */
static void tmp_removed_on(int sig, const char *name)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/%s", check_tmpdir(), name);
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(path, sizeof path, "%s/out.bin", dir);
    int ready[2];
    CHECK_EQ(pipe(ready), 0);
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        struct fsutil_tmp t;
        setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0}); /* SIGQUIT's and SIGXCPU's death dumps no core here */
        if (fsutil_tmp_open(&t, path, NULL) < 0 || fsutil_write_all(t.fd, "half", 4, t.path) < 0)
            _exit(3);
        (void)!write(ready[1], "x", 1);
        for (;;)
            pause();
    }
    char c;
    CHECK_EQ(read(ready[0], &c, 1), 1);
    CHECK_EQ(count_tmp(dir), 1);
    CHECK_EQ(kill(kid, sig), 0);
    int status;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == sig, "status %#x", status);
    CHECK_EQ(count_tmp(dir), 0);
    CHECK(access(path, F_OK) != 0);
}

TEST(fsutil_tmp_removed_on_sigint_sigterm_sighup_sigpipe)
{
    tmp_removed_on(SIGINT, "int");
    tmp_removed_on(SIGTERM, "term");
    tmp_removed_on(SIGHUP, "hup");
    tmp_removed_on(SIGPIPE, "pipe");
}

/* Ctrl-\, a scheduler's warning before the end of a job (Slurm's --signal,
 * which mpirun forwards to every rank), an alarm, a CPU-time limit (ulimit -t):
 * they end a writer as SIGTERM does, and leave no more behind. */
TEST(fsutil_tmp_removed_on_sigquit_sigusr_sigalrm_sigxcpu)
{
    tmp_removed_on(SIGQUIT, "quit");
    tmp_removed_on(SIGUSR1, "usr1");
    tmp_removed_on(SIGUSR2, "usr2");
    tmp_removed_on(SIGALRM, "alrm");
    tmp_removed_on(SIGXCPU, "xcpu");
}

/* A process that exits while a write is under way (a rank's failure ends the
 * job while rank 0 saves) leaves no temporary file either. */
TEST(fsutil_tmp_removed_at_exit)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/exit", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(path, sizeof path, "%s/out.bin", dir);
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        struct fsutil_tmp t;
        setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0}); /* SIGQUIT's and SIGXCPU's death dumps no core here */
        if (fsutil_tmp_open(&t, path, NULL) < 0 || fsutil_write_all(t.fd, "half", 4, t.path) < 0 ||
            count_tmp(dir) != 1)
            _exit(3);
        exit(0);
    }
    int status;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
    CHECK_EQ(count_tmp(dir), 0);
    CHECK(access(path, F_OK) != 0);
}

/* ---- outputs: what may be written ------------------------------------------------ */

/* A node's identity, to see that a refused output was left as it was. */
static void node_of(const char *path, struct stat *st)
{
    CHECK_MSG(lstat(path, st) == 0, "%s: gone", path);
}

static void check_same_node(const char *path, const struct stat *before)
{
    struct stat now;
    node_of(path, &now);
    CHECK_MSG(now.st_ino == before->st_ino && now.st_mode == before->st_mode && now.st_rdev == before->st_rdev,
              "%s: replaced (mode %o, inode %llu, was %o, %llu)", path, (unsigned)now.st_mode,
              (unsigned long long)now.st_ino, (unsigned)before->st_mode, (unsigned long long)before->st_ino);
}

/* A directory holding one of each thing that is not a regular file, and the
 * kind each message must name. A copy of /dev/null stands for every device
 * (for a user, who may not mknod, /dev/null itself: a user cannot replace it
 * even if the code under test tried). */
struct bad_node {
    char path[600];
    const char *says; /* what the message says it is */
};

struct bad_nodes {
    char dir[512];
    int n;
    struct bad_node at[8];
};

static void make_bad_nodes(const char *name, struct bad_nodes *bad)
{
    snprintf(bad->dir, sizeof bad->dir, "%s/%s", check_tmpdir(), name);
    const char *dir = bad->dir;
    CHECK_OK(fsutil_mkdir_p(dir));
    int n = 0;
    struct bad_node *b = bad->at;
    snprintf(b[n].path, sizeof b[n].path, "%s/fifo", dir);
    CHECK_EQ(mkfifo(b[n].path, 0600), 0);
    b[n++].says = "a FIFO, not a regular file: refusing to write over it";
    snprintf(b[n].path, sizeof b[n].path, "%s/directory", dir);
    CHECK_EQ(mkdir(b[n].path, 0700), 0);
    b[n++].says = "a directory, not a regular file";
    snprintf(b[n].path, sizeof b[n].path, "%s/socket", dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    CHECK(strlen(b[n].path) < sizeof sa.sun_path);
    strcpy(sa.sun_path, b[n].path);
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(sock >= 0 && bind(sock, (struct sockaddr *)&sa, sizeof sa) == 0);
    close(sock);
    b[n++].says = "a socket, not a regular file";
    snprintf(b[n].path, sizeof b[n].path, "%s/null", dir);
    if (mknod(b[n].path, S_IFCHR | 0600, makedev(1, 3)) != 0)
        snprintf(b[n].path, sizeof b[n].path, "/dev/null");
    b[n++].says = "a character device, not a regular file";
    snprintf(b[n].path, sizeof b[n].path, "%s/dangling", dir);
    CHECK_EQ(symlink("no-such-file", b[n].path), 0);
    b[n++].says = "a symbolic link to 'no-such-file', which cannot be reached";
    snprintf(b[n].path, sizeof b[n].path, "%s/link-to-fifo", dir);
    CHECK_EQ(symlink("fifo", b[n].path), 0);
    b[n++].says = "a FIFO, not a regular file";
    bad->n = n;
}

TEST(fsutil_refuses_outputs_that_are_not_regular_files)
{
    struct bad_nodes bad;
    make_bad_nodes("bad-outputs", &bad);
    const char *dir = bad.dir;
    for (int i = 0; i < bad.n; i++) {
        struct stat before;
        node_of(bad.at[i].path, &before);
        char want[PATH_MAX + 1024];
        snprintf(want, sizeof want, "--save: %s: %s", bad.at[i].path, bad.at[i].says);
        CHECK_ERR(fsutil_check_output(bad.at[i].path, "--save"), ERR_IO, want);
        struct fsutil_tmp t;
        CHECK_ERR(fsutil_tmp_open(&t, bad.at[i].path, "--save"), ERR_IO, want);
        check_same_node(bad.at[i].path, &before);
    }
    CHECK_EQ(count_tmp(dir), 0);
    CHECK_ERR(fsutil_check_output("", "--trace"), ERR_ARG, "--trace: an empty path: name a file");
    CHECK_ERR(fsutil_check_output_dir("", "--out"), ERR_ARG, "--out: an empty path: name a directory");
    CHECK_ERR(fsutil_check_output_dir(bad.at[0].path, "--out"), ERR_IO, "--out: ");
    CHECK_CONTAINS(err_msg(), "fifo: a FIFO, not a directory: refusing to write into it");
    CHECK_ERR(fsutil_check_output_dir("/dev/null", "--checkpoint"), ERR_IO, "a character device, not a directory");
    char made[PATH_MAX];
    snprintf(made, sizeof made, "%s/sub", bad.at[0].path); /* under a FIFO: mkdir -p names it */
    CHECK_ERR(fsutil_mkdir_p(made), ERR_IO, "fifo: a FIFO, not a directory");
    /* and so does the check, before a run that mkdir -p would stop at its end */
    CHECK_ERR(fsutil_check_output_dir(made, "--out"), ERR_IO, "fifo is a FIFO, not a directory: nothing can be written");
    CHECK_ERR(fsutil_check_output(made, "--save"), ERR_IO, "fifo is a FIFO, not a directory: nothing can be written");
    char name[300]; /* a name past the 255 bytes of a file name: refused now, not by the write after the run */
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    snprintf(made, sizeof made, "%s/%s", dir, name);
    CHECK_ERR(fsutil_check_output(made, "--trace"), ERR_ARG, "File name too long (");
    CHECK_ERR(fsutil_check_output_dir(made, "--out"), ERR_ARG, "File name too long (");
    /* what may be written: a new name, a regular file, a directory for a directory */
    CHECK_OK(fsutil_check_output_dir(dir, "--out"));
    snprintf(made, sizeof made, "%s/new.bin", dir);
    CHECK_OK(fsutil_check_output(made, "--save"));
}

/* A link to a regular file is written through: the file it names gets the
 * new contents, and the link stays a link. */
TEST(fsutil_writes_through_a_link_to_a_regular_file)
{
    char dir[512], file[600], link[600], text[64];
    snprintf(dir, sizeof dir, "%s/through", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(file, sizeof file, "%s/target.txt", dir);
    snprintf(link, sizeof link, "%s/latest.txt", dir);
    struct fsutil_tmp t;
    CHECK_OK(fsutil_tmp_open(&t, file, NULL));
    CHECK_OK(fsutil_tmp_finish(&t, fsutil_write_all(t.fd, "old\n", 4, t.path), 0));
    CHECK_EQ(symlink("target.txt", link), 0);
    CHECK_OK(fsutil_tmp_open(&t, link, "--save"));
    CHECK_OK(fsutil_tmp_finish(&t, fsutil_write_all(t.fd, "new\n", 4, t.path), 0));
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    read_text(file, text, sizeof text);
    CHECK_STR(text, "new\n");
    CHECK_EQ(count_tmp(dir), 0);
}

/* Two outputs that are one file are found the same however they are
 * written: through "..", "." or a link to the file, before and after it exists. */
TEST(fsutil_same_output_sees_one_file_under_two_names)
{
    char dir[512], a[600], b[600], link[600];
    snprintf(dir, sizeof dir, "%s/same", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(a, sizeof a, "%s/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/../same/./model.safetensors", dir);
    snprintf(link, sizeof link, "%s/latest.safetensors", dir);
    CHECK_EQ(fsutil_same_output(a, b), 1); /* not written yet */
    CHECK_EQ(fsutil_same_output(a, link), 0);
    struct fsutil_tmp t;
    CHECK_OK(fsutil_tmp_open(&t, a, NULL));
    CHECK_OK(fsutil_tmp_finish(&t, 0, 0));
    CHECK_EQ(symlink("model.safetensors", link), 0);
    CHECK_EQ(fsutil_same_output(b, link), 1);
    CHECK_EQ(fsutil_same_output(a, "model.safetensors"), 0); /* another directory */
}

/* The path is checked again at the rename: a FIFO made there while the file
 * was being written is left as it is, and the write fails naming it. */
TEST(fsutil_checks_the_output_again_before_the_rename)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/again", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(path, sizeof path, "%s/trace.json", dir);
    struct fsutil_tmp t;
    CHECK_OK(fsutil_tmp_open(&t, path, "--trace"));
    CHECK_OK(fsutil_write_all(t.fd, "{}", 2, t.path));
    CHECK_EQ(mkfifo(path, 0600), 0);
    struct stat before;
    node_of(path, &before);
    CHECK_ERR(fsutil_tmp_finish(&t, 0, 0), ERR_IO, "--trace: ");
    CHECK_CONTAINS(err_msg(), "trace.json: a FIFO, not a regular file");
    check_same_node(path, &before);
    CHECK_EQ(count_tmp(dir), 0);
}

/* ---- inputs: opened without blocking -------------------------------------------- */

TEST(fsutil_open_read_refuses_what_is_not_a_regular_file_at_once)
{
    struct bad_nodes bad;
    make_bad_nodes("bad-inputs", &bad);
    for (int i = 0; i < bad.n; i++) {
        int fd = 7;
        /* a FIFO that blocked would time the test out */
        int rc = fsutil_open_read(bad.at[i].path, "--init", &fd, NULL);
        CHECK_MSG(rc == ERR_IO && fd == -1, "%s: %s (%d)", bad.at[i].path, err_msg(), rc);
        char want[PATH_MAX + 1024];
        snprintf(want, sizeof want, "--init: %s: ", bad.at[i].path);
        CHECK_CONTAINS(err_msg(), want);
    }
    CHECK_ERR(({
                  int fd;
                  fsutil_open_read(bad.at[0].path, NULL, &fd, NULL);
              }),
              ERR_IO, "fifo: not a regular file (a FIFO)");
    char file[600];
    snprintf(file, sizeof file, "%s/regular", bad.dir);
    struct fsutil_tmp t;
    CHECK_OK(fsutil_tmp_open(&t, file, NULL));
    CHECK_OK(fsutil_tmp_finish(&t, fsutil_write_all(t.fd, "abc", 3, t.path), 0));
    int fd;
    struct stat st;
    CHECK_OK(fsutil_open_read(file, NULL, &fd, &st));
    CHECK_EQ(st.st_size, 3);
    CHECK_EQ(fcntl(fd, F_GETFL) & O_NONBLOCK, 0); /* cleared for whoever reads it */
    close(fd);
}

/* ---- a file-size limit and a full disk ------------------------------------------- */

/* Under `ulimit -f`, a write past the limit fails with a message instead of
 * SIGXFSZ killing the process, the temporary file goes, and the file it
 * would have replaced stays whole. In a child: the limit is per process. */
TEST(fsutil_file_size_limit_is_an_error_not_a_death)
{
    char dir[512], path[600], text[64];
    snprintf(dir, sizeof dir, "%s/fsize", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    FILE *f = fopen(path, "w"); /* not through fsutil: the child must be the first to call it, as a program is */
    CHECK(f && fputs("last good\n", f) >= 0 && fclose(f) == 0);
    int said[2];
    CHECK_EQ(pipe(said), 0);
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        signal(SIGXFSZ, SIG_DFL); /* as a program starts */
        struct rlimit limit = {4096, 4096};
        static char big[65536];
        struct fsutil_tmp t;
        if (setrlimit(RLIMIT_FSIZE, &limit) != 0 || fsutil_tmp_open(&t, path, "--checkpoint") < 0)
            _exit(3);
        int rc = fsutil_tmp_finish(&t, fsutil_write_all(t.fd, big, sizeof big, t.final), FSUTIL_DURABLE);
        (void)!write(said[1], err_msg(), strlen(err_msg()));
        _exit(rc == ERR_IO ? 0 : 4);
    }
    close(said[1]);
    char msg[1024] = "";
    ssize_t got = read(said[0], msg, sizeof msg - 1);
    msg[got > 0 ? got : 0] = '\0';
    close(said[0]);
    int status;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x (SIGXFSZ is %d): %s", status, SIGXFSZ, msg);
    CHECK_CONTAINS(msg, "file size limit (ulimit -f) reached writing ");
    CHECK_CONTAINS(msg, "checkpoint.safetensors");
    read_text(path, text, sizeof text);
    CHECK_STR(text, "last good\n");
    CHECK_EQ(count_tmp(dir), 0);
}

/* ---- files another program writes ---------------------------------------------- */

/* What gnuplot does with out='STEM': writes STEM.png and STEM.svg. */
static void write_parts(const struct fsutil_parts *p, const char *what)
{
    for (int k = 0; p->suffixes[k]; k++) {
        char part[PATH_MAX + 128];
        snprintf(part, sizeof part, "%s%s", p->stem.path, p->suffixes[k]);
        FILE *f = fopen(part, "w");
        CHECK_MSG(f && fputs(what, f) >= 0 && fclose(f) == 0, "%s: cannot write", part);
    }
}

TEST(fsutil_parts_are_renamed_into_place_or_removed)
{
    static const char *const pictures[] = {".png", ".svg", NULL};
    char dir[512], out[600], png[700], fifo[700], text[64];
    snprintf(dir, sizeof dir, "%s/parts", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(out, sizeof out, "%s/gantt", dir);
    snprintf(png, sizeof png, "%s.png", out);
    struct fsutil_parts p;
    CHECK_OK(fsutil_parts_open(&p, out, pictures, "--out"));
    write_parts(&p, "first");
    CHECK_OK(fsutil_parts_finish(&p, 0));
    read_text(png, text, sizeof text);
    CHECK_STR(text, "first");
    struct stat st;
    CHECK(stat(png, &st) == 0 && (st.st_mode & 0777) == 0644);
    /* a program that failed: its parts go, the old pictures stay */
    CHECK_OK(fsutil_parts_open(&p, out, pictures, "--out"));
    write_parts(&p, "half");
    CHECK_EQ(fsutil_parts_finish(&p, err_set(ERR_IO, "gnuplot failed")), ERR_IO);
    read_text(png, text, sizeof text);
    CHECK_STR(text, "first");
    CHECK_EQ(count_tmp(dir), 0);
    /* one that wrote nothing */
    CHECK_OK(fsutil_parts_open(&p, out, pictures, "--out"));
    CHECK_ERR(fsutil_parts_finish(&p, 0), ERR_IO, "gantt.png: was not written");
    CHECK_EQ(count_tmp(dir), 0);
    /* a FIFO in a picture's place: refused before the program runs, and left */
    snprintf(out, sizeof out, "%s/timeline", dir);
    snprintf(fifo, sizeof fifo, "%s.svg", out);
    CHECK_EQ(mkfifo(fifo, 0600), 0);
    struct stat before;
    node_of(fifo, &before);
    CHECK_ERR(fsutil_parts_open(&p, out, pictures, "--out"), ERR_IO, "--out: ");
    CHECK_CONTAINS(err_msg(), "timeline.svg: a FIFO, not a regular file");
    check_same_node(fifo, &before);
    CHECK_EQ(count_tmp(dir), 0);
}

/* A killed plot leaves STEM.png: the next one sweeps it, as any temporary. */
TEST(fsutil_parts_a_dead_writer_left_are_swept)
{
    static const char *const pictures[] = {".png", ".svg", NULL};
    char dir[512], out[600], dead[PATH_MAX + 128];
    snprintf(dir, sizeof dir, "%s/parts-swept", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(out, sizeof out, "%s/plot", dir);
    struct fsutil_parts p;
    CHECK_OK(fsutil_parts_open(&p, out, pictures, NULL));
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    CHECK_EQ(waitpid(gone, NULL, 0), gone);
    char stem[PATH_MAX + 64];
    tmp_name_of(p.stem.path, gone, stem, sizeof stem);
    snprintf(dead, sizeof dead, "%s.png", stem);
    touch(dead);
    CHECK_EQ(fsutil_parts_finish(&p, ERR_STATE), ERR_STATE);
    CHECK_OK(fsutil_parts_open(&p, out, pictures, NULL));
    CHECK_MSG(access(dead, F_OK) != 0, "%s: a dead plot's picture was kept", dead);
    CHECK_EQ(fsutil_parts_finish(&p, ERR_STATE), ERR_STATE);
    CHECK_EQ(count_tmp(dir), 0);
}

/* A CSV goes through the same temporary file: a failed writer leaves the
 * old one, a FIFO in its place is refused, named with the flag, and left. */
TEST(plot_csv_is_written_whole_or_not_at_all)
{
    char dir[512], path[600], text[64];
    snprintf(dir, sizeof dir, "%s/csv/made/by/open", check_tmpdir());
    snprintf(path, sizeof path, "%s/data.csv", dir);
    struct plot_csv c;
    CHECK_OK(plot_csv_open(&c, path, "--out"));
    fprintf(c.f, "a,b\n1,2\n");
    CHECK_OK(plot_csv_close(&c, 0));
    read_text(path, text, sizeof text);
    CHECK_STR(text, "a,b\n1,2\n");
    CHECK_OK(plot_csv_open(&c, path, "--out"));
    fprintf(c.f, "half");
    CHECK_EQ(plot_csv_close(&c, err_set(ERR_STATE, "the run failed")), ERR_STATE);
    read_text(path, text, sizeof text);
    CHECK_STR(text, "a,b\n1,2\n");
    CHECK_EQ(count_tmp(dir), 0);
    snprintf(path, sizeof path, "%s/fifo.csv", dir);
    CHECK_EQ(mkfifo(path, 0600), 0);
    CHECK_ERR(plot_csv_open(&c, path, "--out"), ERR_IO, "--out: ");
    CHECK_CONTAINS(err_msg(), "fifo.csv: a FIFO, not a regular file");
    CHECK_EQ(count_tmp(dir), 0);
}

/* plot_render hands gnuplot one command line, csv='...'; out='...'; title='...', in a buffer of its own:
 * quotes in every piece reach gnuplot as they were, and pieces that do not fit are refused naming the
 * flag, whatever their lengths (a CSV path of every length across the edge, where appending the title
 * once wrote past the buffer's end). */
TEST(plot_render_bounds_gnuplots_command_line)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0)
        CHECK_SKIP("gnuplot is not installed");
    char dir[512], script[600], out[600], pic[700], text[256];
    snprintf(dir, sizeof dir, "%s/render", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(script, sizeof script, "%s/echo.gp", dir);
    FILE *f = fopen(script, "w");
    CHECK(f != NULL);
    fputs("set print out.'.png'\nprint title\nset print out.'.svg'\nprint csv\n", f);
    fclose(f);
    snprintf(out, sizeof out, "%s/picture", dir);
    CHECK_OK(plot_render_titled(script, "it's.csv", out, "Bob's plot", "--out"));
    snprintf(pic, sizeof pic, "%s.png", out);
    read_text(pic, text, sizeof text);
    CHECK_STR(text, "Bob's plot\n");
    snprintf(pic, sizeof pic, "%s.svg", out);
    read_text(pic, text, sizeof text);
    CHECK_STR(text, "it's.csv\n");
    /* the stem plot_render gives gnuplot is as long as this one, give or take a digit of its counter */
    static const char *const suffixes[] = {".png", ".svg", NULL};
    struct fsutil_parts parts;
    CHECK_OK(fsutil_parts_open(&parts, out, suffixes, NULL));
    size_t stem = strlen(parts.stem.path);
    CHECK_EQ(fsutil_parts_finish(&parts, ERR_STATE), ERR_STATE);
    size_t cap = 3 * PLOT_PATH_MAX, edge = cap - strlen("csv='") - strlen("'; out='") - stem;
    char *csv = malloc(cap + 64);
    CHECK(csv != NULL);
    int rendered = 0, refused = 0;
    for (size_t len = edge - 40; len <= edge + 8; len++) {
        memset(csv, 'c', len);
        csv[len] = '\0';
        int rc = plot_render_titled(script, csv, out, "t", "--out");
        CHECK_MSG(rc == 0 || rc == ERR_ARG, "a CSV path of %zu characters: %s", len, err_msg());
        if (rc == ERR_ARG) {
            CHECK_CONTAINS(err_msg(), "--out: ");
            CHECK_CONTAINS(err_msg(), "picture: too long for gnuplot's command line");
            CHECK_CONTAINS(err_msg(), ", the title 1,");
        }
        rendered += rc == 0;
        refused += rc == ERR_ARG;
    }
    free(csv);
    CHECK_MSG(rendered > 0 && refused > 0, "%d rendered, %d refused: the lengths missed the edge", rendered, refused);
    CHECK_EQ(count_tmp(dir), 0);
}

/* A program that ignores SIGINT (nohup, a shell's background job) keeps
 * ignoring it: the handler goes only where the action was the default. */
TEST(fsutil_ignored_signal_stays_ignored)
{
    char path[600];
    snprintf(path, sizeof path, "%s/ignored.bin", check_tmpdir());
    pid_t kid = fork();
    CHECK(kid >= 0);
    if (kid == 0) {
        signal(SIGINT, SIG_IGN);
        struct fsutil_tmp t;
        if (fsutil_tmp_open(&t, path, NULL) < 0)
            _exit(3);
        raise(SIGINT);
        _exit(fsutil_tmp_finish(&t, 0, 0) == 0 ? 0 : 4);
    }
    int status;
    CHECK_EQ(waitpid(kid, &status, 0), kid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
    CHECK(access(path, F_OK) == 0);
}

TEST(fsutil_sweeps_only_dead_writers_tmp_files)
{
    char dir[512], path[600], dead[1200], live[1200], foreign[1200], other[1200];
    snprintf(dir, sizeof dir, "%s/sweep", check_tmpdir());
    CHECK_OK(fsutil_mkdir_p(dir));
    snprintf(path, sizeof path, "%s/data.offsets", dir);
    struct fsutil_tmp t;
    CHECK_OK(fsutil_tmp_open(&t, path, NULL));
    /* a process that has exited (its pid is free: nothing runs as it now) */
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    CHECK_EQ(waitpid(gone, NULL, 0), gone);
    /* one still running */
    pid_t running = fork();
    if (running == 0) {
        for (;;)
            pause();
    }
    tmp_name_of(t.path, gone, dead, sizeof dead);
    tmp_name_of(t.path, running, live, sizeof live);
    snprintf(foreign, sizeof foreign, "%s/data.offsets.tmp-00000000-%ld-0", dir, (long)gone); /* another host */
    snprintf(other, sizeof other, "%s/other.offsets%s", dir, strstr(dead, ".tmp-")); /* another final name */
    touch(dead);
    touch(live);
    touch(foreign);
    touch(other);
    CHECK_OK(fsutil_tmp_finish(&t, 0, 0));
    struct fsutil_tmp again;
    int rc = fsutil_tmp_open(&again, path, NULL); /* sweeps */
    kill(running, SIGKILL); /* first: a failed check must not leave it running */
    waitpid(running, NULL, 0);
    CHECK_OK(rc);
    CHECK_MSG(access(dead, F_OK) != 0, "%s: a dead writer's file was kept", dead);
    CHECK_MSG(access(live, F_OK) == 0, "%s: a live writer's file was removed", live);
    CHECK_MSG(access(foreign, F_OK) == 0, "%s: another host's file was removed", foreign);
    CHECK_MSG(access(other, F_OK) == 0, "%s: another file's temporary was removed", other);
    CHECK_MSG(access(again.path, F_OK) == 0, "%s: our own file is gone", again.path);
    CHECK_OK(fsutil_tmp_finish(&again, 0, 0));
}

TEST(fsutil_check_space_refuses_what_cannot_fit)
{
    char sub[600];
    snprintf(sub, sizeof sub, "%s/not/made/yet/file", check_tmpdir());
    CHECK_OK(fsutil_check_space(sub, 1000, "a small file"));
    CHECK_ERR(fsutil_check_space(sub, UINT64_MAX, "the corpus"), ERR_RANGE, "the corpus needs 16.0 EiB, only ");
    CHECK_CONTAINS(err_msg(), " are free on ");
}

/* A mapped file cut short under its reader: the read's SIGBUS becomes a
 * message naming the file and exit status 1, and a SIGBUS that is not about
 * our mappings still ends the process as SIGBUS. Each runs in a child
 * (isolate_run()), which says how it ended. */
static char mapped_path[600];

static void read_past_a_truncation(void)
{
    int fd = open(mapped_path, O_RDONLY);
    const void *map;
    CHECK(fd >= 0);
    CHECK_OK(mapfile_map(fd, 65536, mapped_path, &map));
    CHECK_EQ(truncate(mapped_path, 4096), 0);
    (void)((const volatile char *)map)[40000]; /* past the new end */
}

static void raise_a_foreign_sigbus(void)
{
    int fd = open(mapped_path, O_RDONLY);
    const void *map;
    CHECK(fd >= 0);
    CHECK_OK(mapfile_map(fd, 4096, mapped_path, &map));
    struct rlimit none = {0, 0}; /* no core file from the test */
    setrlimit(RLIMIT_CORE, &none);
    raise(SIGBUS); /* sent, not a fault in our mapping: not ours to explain */
}

TEST(mapfile_truncated_while_mapped_is_named)
{
    snprintf(mapped_path, sizeof mapped_path, "%s/mapped.bin", check_tmpdir());
    FILE *f = fopen(mapped_path, "wb");
    static char page[65536];
    CHECK(f && fwrite(page, 1, sizeof page, f) == sizeof page);
    fclose(f);
    char said[4096];
    CHECK(!isolate_run(read_past_a_truncation, 20, said, sizeof said));
    CHECK_CONTAINS(said, "mapped.bin: truncated while mapped: it had 65536 bytes when it was opened and has 4096 now, "
                         "and a read of byte 40000 faulted (SIGBUS)");
    CHECK_CONTAINS(said, "[exited with status 1]");
    CHECK(!isolate_run(raise_a_foreign_sigbus, 20, said, sizeof said));
    /* Not claimed: SIGBUS's own default action, or a sanitizer's handler that was there before ours */
    CHECK_MSG(!strstr(said, "truncated while mapped") &&
                  (strstr(said, "killed by SIGBUS") || strstr(said, "Sanitizer: BUS on unknown address")),
              "%s", said);
}

/* The best timing first, the median at n / 2, ties and a single one kept. */
TEST(measure_sort_puts_the_best_first)
{
    double v[] = {3.5, 1.25, 2.0, 1.25, 9.0};
    measure_sort(v, 5);
    const double want[] = {1.25, 1.25, 2.0, 3.5, 9.0};
    for (int i = 0; i < 5; i++)
        CHECK_MSG(v[i] == want[i], "v[%d] = %g, not %g", i, v[i], want[i]);
    double one = 7.0;
    measure_sort(&one, 1);
    CHECK(one == 7.0);
}

TEST(measure_memcpy_reports_a_rate)
{
    struct measure_bandwidth bw;
    CHECK_OK(measure_memcpy(1 << 20, 5, MEASURE_WALL, &bw));
    CHECK(bw.best_bps >= bw.median_bps && bw.median_bps > 0);
    CHECK_EQ(bw.trials, 5);
    CHECK_OK(measure_memcpy(1 << 20, 3, MEASURE_THREAD_CPU, &bw));
    CHECK(bw.best_bps > 0);
    CHECK_ERR(measure_memcpy(0, 3, MEASURE_WALL, &bw), ERR_ARG, "bytes");
}

/* A kernel that counts its calls and copies, so a test sees it ran. */
static void counting_kernel(void *user, void *dst, const void *src, size_t bytes)
{
    __atomic_add_fetch((int *)user, 1, __ATOMIC_RELAXED);
    memcpy(dst, src, bytes);
}

TEST(measure_copy_runs_every_thread_every_trial)
{
    int calls = 0;
    struct measure_copy spec = {.bytes = 1 << 16, .trials = 4, .threads = 3, .clock = MEASURE_WALL,
                                .kernel = counting_kernel, .user = &calls};
    struct measure_bandwidth bw;
    CHECK_OK(measure_copy(&spec, &bw));
    CHECK_EQ(calls, 12);
    CHECK_EQ(bw.bytes, 3u << 16); /* a trial counts every thread's bytes */
    CHECK(bw.best_bps >= bw.median_bps && bw.median_bps > 0 && bw.mean_bps > 0);
    spec.threads = 0;
    CHECK_ERR(measure_copy(&spec, &bw), ERR_ARG, "threads");
}

TEST(measure_gather_copies_records_in_order)
{
    uint64_t order[] = {3, 0, 2, 2, 1};
    struct measure_bandwidth bw;
    CHECK_OK(measure_gather(4096, 4, order, 5, 2, 3, MEASURE_THREAD_CPU, &bw));
    CHECK_EQ(bw.bytes, 5u * 4096);
    CHECK(bw.best_bps > 0);
    order[4] = 4;
    CHECK_ERR(measure_gather(4096, 4, order, 5, 2, 3, MEASURE_WALL, &bw), ERR_ARG, "index 4 at position 4");
    CHECK_ERR(measure_gather(1ull << 40, 1ull << 40, order, 4, 2, 3, MEASURE_WALL, &bw), ERR_ARG, "overflow");
}

static int child_allocates(void *arg, void *result)
{
    size_t mib = *(size_t *)arg;
    char *p = malloc(mib << 20);
    if (!p)
        return err_set(ERR_NOMEM, "no memory");
    memset(p, 7, mib << 20); /* touch it, so it counts as resident */
    *(long *)result = p[12345] + 35;
    free(p);
    return 0;
}

static int child_fails(void *arg, void *result)
{
    (void)arg;
    (void)result;
    return err_set(ERR_FORMAT, "the child's own words");
}

static int child_dies(void *arg, void *result)
{
    (void)arg;
    (void)result;
    raise(SIGKILL);
    return 0;
}

TEST(measure_in_child_returns_result_and_peak)
{
    size_t small = 1, big = 64;
    long result = 0;
    uint64_t peak_small = 0, peak_big = 0;
    CHECK_OK(measure_in_child(child_allocates, &small, &result, sizeof result, &peak_small));
    CHECK_EQ(result, 42);
    CHECK_OK(measure_in_child(child_allocates, &big, &result, sizeof result, &peak_big));
    /* the 64 MiB child's peak exceeds the 1 MiB child's by most of 63 MiB */
    CHECK_MSG(peak_big > peak_small + 48 * 1024, "peaks %llu and %llu KiB", (unsigned long long)peak_small,
              (unsigned long long)peak_big);
}

TEST(measure_in_child_carries_errors_and_deaths)
{
    long result;
    uint64_t peak;
    CHECK_ERR(measure_in_child(child_fails, NULL, &result, sizeof result, &peak), ERR_FORMAT, "the child's own words");
    CHECK_ERR(measure_in_child(child_dies, NULL, &result, sizeof result, &peak), ERR_IO, "signal 9");
}

TEST(clock_thread_cpu_counts_work_not_sleep)
{
    uint64_t t0 = clock_thread_cpu_ns();
    clock_sleep_ns(50 * 1000000ull);
    uint64_t slept = clock_thread_cpu_ns() - t0;
    t0 = clock_thread_cpu_ns();
    clock_spin_ns(50 * 1000000ull);
    uint64_t spun = clock_thread_cpu_ns() - t0;
    CHECK_MSG(slept < spun, "sleeping used %llu ns of CPU, spinning %llu", (unsigned long long)slept,
              (unsigned long long)spun);
}
