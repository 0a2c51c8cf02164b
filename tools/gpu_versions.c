/* gpu_versions: the versions of the GPU libraries a build links (CUDA's
 * runtime, cuBLAS, NCCL) and of the driver under them, asked of the libraries
 * themselves.
 *
 * Where it sits: beside the GPU runs. tools/gpu_reference.sh records its
 * lines with every reference run under notebooks-out/reference/, so that a
 * figure there names the libraries that made it. A file name says little
 * (libnccl.so.2 is every NCCL 2), so each library is asked through its own
 * entry point: cudaRuntimeGetVersion, cudaDriverGetVersion,
 * cublasGetProperty, ncclGetVersion. They are found by name among the
 * libraries this process has loaded (dlsym), never declared from CUDA's
 * headers: the tool builds, and says "not linked", where CUDA is not
 * installed. The tools link what the chapter programs link; the LIBRARY
 * arguments (the paths `ldd build/chapter-6` prints) are loaded first, so
 * that the answer is the program's even where a linker drops libraries a
 * program does not call (--as-needed).
 */
#include "base/cli.h"
#include "base/error.h"
#include "base/fsutil.h"

#include <dlfcn.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define GPU_VERSIONS_PROG "gpu_versions"

/* Every entry point asked here takes an int* and returns 0 on success
 * (cudaSuccess, CUBLAS_STATUS_SUCCESS, ncclSuccess), but cublasGetProperty,
 * which takes the property first. */
typedef int (*gpu_versions_int_fn)(int *);
typedef int (*gpu_versions_property_fn)(int, int *);

/* cuBLAS's libraryPropertyType values (library_types.h). */
enum { GPU_VERSIONS_MAJOR = 0, GPU_VERSIONS_MINOR = 1, GPU_VERSIONS_PATCH = 2 };

static void gpu_versions_usage(void)
{
    printf("usage: %s [LIBRARY ...]\n"
           "\n"
           "Prints one line each for the CUDA runtime, the driver, cuBLAS and NCCL this build links:\n"
           "the version each library reports of itself and the file it was loaded from, or \"not\n"
           "linked\". Each LIBRARY (a path, as `ldd build/chapter-6` prints it) is loaded first, so\n"
           "that a program's own libraries answer. Needs no GPU: the driver's line then says none is\n"
           "loaded.\n"
           "\n"
           "  --help   this text\n"
           "\n"
           "Exit status: 0 when every line was printed, 1 when a LIBRARY cannot be loaded or a\n"
           "library's call fails, 2 for a bad flag.\n",
           GPU_VERSIONS_PROG);
}

/* The entry point `name` among the loaded libraries, or NULL; *file names the
 * library it lives in. */
static void *gpu_versions_find_symbol(const char *name, const char **file)
{
    void *sym = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    *file = sym && dladdr(sym, &info) && info.dli_fname ? info.dli_fname : "?";
    return sym;
}

/* "LABEL: TEXT (FILE)", or the label's "not linked" line when no library has it. */
static void gpu_versions_print_line(const char *label, int found, const char *text, const char *file)
{
    if (!found)
        printf("%s: not linked\n", label);
    else
        printf("%s: %s (%s)\n", label, text, file);
}

/* Calls the entry point `name`, an int (*)(int *), into *v. Returns 1 when it
 * answered, 0 when no loaded library has it, ERR_IO naming it and its library
 * when it failed. */
static int gpu_versions_ask(const char *name, int *v, const char **file)
{
    void *sym = gpu_versions_find_symbol(name, file);
    if (!sym)
        return 0;
    gpu_versions_int_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    int rc = fn(v);
    return rc == 0 ? 1 : err_set(ERR_IO, "%s (%s) failed: it returned %d", name, *file, rc);
}

/* The CUDA runtime's version and the driver's, as the runtime reports them:
 * 1000 * major + 10 * minor; 0 for the driver when none is loaded. */
static int gpu_versions_print_cuda(void)
{
    const char *file;
    char text[64] = "";
    int v = 0, found = gpu_versions_ask("cudaRuntimeGetVersion", &v, &file);
    if (found < 0)
        return found;
    snprintf(text, sizeof text, "%d.%d", v / 1000, v % 1000 / 10);
    gpu_versions_print_line("cuda runtime", found, text, file);

    if ((found = gpu_versions_ask("cudaDriverGetVersion", &v, &file)) < 0)
        return found;
    if (v == 0)
        snprintf(text, sizeof text, "none loaded (no NVIDIA driver on this machine)");
    else
        snprintf(text, sizeof text, "CUDA %d.%d, as the runtime reports it", v / 1000, v % 1000 / 10);
    gpu_versions_print_line("cuda driver", found, text, file);
    return 0;
}

static int gpu_versions_print_cublas(void)
{
    const char *file;
    void *sym = gpu_versions_find_symbol("cublasGetProperty", &file);
    char text[64] = "";
    if (sym) {
        gpu_versions_property_fn fn;
        memcpy(&fn, &sym, sizeof fn);
        int part[3];
        for (int i = 0; i < 3; i++) {
            int rc = fn(GPU_VERSIONS_MAJOR + i, &part[i]);
            if (rc != 0)
                return err_set(ERR_IO, "cublasGetProperty(%d) (%s) failed: it returned %d", i, file, rc);
        }
        snprintf(text, sizeof text, "%d.%d.%d", part[0], part[1], part[2]);
    }
    gpu_versions_print_line("cublas", sym != NULL, text, file);
    return 0;
}

/* NCCL's code is major * 10000 + minor * 100 + patch since 2.9, major * 1000
 * + minor * 100 + patch before (nccl.h's NCCL_VERSION). */
static int gpu_versions_print_nccl(void)
{
    const char *file;
    char text[64] = "";
    int v = 0, found = gpu_versions_ask("ncclGetVersion", &v, &file);
    if (found < 0)
        return found;
    int major = v >= 10000 ? v / 10000 : v / 1000;
    int rest = v >= 10000 ? v % 10000 : v % 1000;
    snprintf(text, sizeof text, "%d.%d.%d", major, rest / 100, rest % 100);
    gpu_versions_print_line("nccl", found, text, file);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        if (c == 'h') {
            gpu_versions_usage();
            return CLI_EXIT_OK;
        }
        cli_getopt_error(c, argv[optind - 1], options);
        return cli_fail(GPU_VERSIONS_PROG);
    }
    for (int i = optind; i < argc; i++) {
        int fd;
        if (!argv[i][0]) { /* dlopen("") answers with this program itself */
            err_set(ERR_ARG, "LIBRARY: expected a path, got an empty value");
            return cli_fail(GPU_VERSIONS_PROG);
        }
        /* a path must be a regular file: dlopen of a FIFO waits for a writer forever
         * (a bare name is searched for, as dlopen does) */
        if (strchr(argv[i], '/')) {
            if (fsutil_open_read(argv[i], NULL, &fd, NULL) < 0)
                return cli_error(GPU_VERSIONS_PROG);
            close(fd);
        }
        /* RTLD_GLOBAL: its symbols join those dlsym(RTLD_DEFAULT) searches */
        if (!dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL)) {
            err_set(ERR_IO, "%s: cannot load it: %s", argv[i], dlerror());
            return cli_error(GPU_VERSIONS_PROG);
        }
    }
    if (gpu_versions_print_cuda() < 0 || gpu_versions_print_cublas() < 0 || gpu_versions_print_nccl() < 0)
        return cli_error(GPU_VERSIONS_PROG);
    return cli_exit(GPU_VERSIONS_PROG, CLI_EXIT_OK); /* the versions a reference file records */
}
