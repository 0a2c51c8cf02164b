/* test_safetensors: lib/ddp/safetensors. What we write reads back (tensors,
 * shapes, metadata, the 8-byte alignment of the data); and every hostile file
 * is refused with a message that names the file and the problem: header
 * sizes near 2^64 or past the file, bad JSON, duplicate keys, unknown dtypes,
 * negative or overflowing shapes, offsets out of range, overlapping, leaving
 * gaps or trailing bytes, wrong dtype or shape at read time. F16, BF16 and
 * F64 read as float32 with torch's bits. A failed write leaves nothing
 * behind. (That PyTorch reads our files and we read its is
 * tests/crosscheck/ddp_torch.sh's.) */
#include "check.h"
#include "base/error.h"
#include "base/fsutil.h"
#include "ddp/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A raw file: 8-byte size (header length unless `size` is given), header, data. */
static const char *raw_file(const char *name, const char *header, const uint64_t *size, const void *data, size_t n)
{
    const char *path = check_tmp_path(name);
    FILE *f = fopen(path, "wb");
    CHECK(f);
    uint64_t len = size ? *size : strlen(header);
    unsigned char le[8];
    for (int b = 0; b < 8; b++)
        le[b] = (unsigned char)(len >> (8 * b));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    if (n)
        fwrite(data, 1, n, f);
    fclose(f);
    return path;
}

TEST(safetensors_round_trip)
{
    float w[6] = {1, 2, 3, 4, 5, 6.5f}, b[3] = {-1, 0, 1};
    int64_t counter = 42;
    uint16_t h[2] = {0x3c00, 0xc000};
    struct safetensors_entry e[] = {
        {.name = "fc1.weight", .dtype = SAFETENSORS_F32, .ndim = 2, .shape = {3, 2}, .data = w},
        {.name = "fc1.bias", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {3}, .data = b},
        {.name = "bn1.num_batches_tracked", .dtype = SAFETENSORS_I64, .ndim = 0, .data = &counter},
        {.name = "half", .dtype = SAFETENSORS_F16, .ndim = 1, .shape = {2}, .data = h},
        {.name = "empty", .dtype = SAFETENSORS_F32, .ndim = 2, .shape = {0, 5}, .data = NULL},
    };
    struct safetensors_meta meta[] = {{"format", "pt"}, {"step", "17"}};
    const char *path = check_tmp_path("rt.safetensors");
    CHECK_OK(safetensors_write(path, e, 5, meta, 2, FSUTIL_DURABLE));
    safetensors_t *st;
    CHECK_OK(safetensors_open(path, &st));
    CHECK_EQ(safetensors_count(st), 5);
    CHECK_STR(safetensors_meta(st, "step"), "17");
    CHECK(safetensors_meta(st, "nothing") == NULL);
    float w2[6], b2[3];
    int64_t c2;
    const int64_t ws[2] = {3, 2}, bs[1] = {3};
    CHECK_OK(safetensors_read(st, "fc1.weight", SAFETENSORS_F32, 2, ws, w2));
    CHECK_OK(safetensors_read(st, "fc1.bias", SAFETENSORS_F32, 1, bs, b2));
    CHECK_OK(safetensors_read(st, "bn1.num_batches_tracked", SAFETENSORS_I64, 0, NULL, &c2));
    CHECK(memcmp(w, w2, sizeof w) == 0 && memcmp(b, b2, sizeof b) == 0 && c2 == 42);
    const struct safetensors_tensor *t = safetensors_find(st, "half");
    CHECK(t && t->dtype == SAFETENSORS_F16 && t->numel == 2 && t->bytes == 4);
    t = safetensors_find(st, "empty");
    CHECK(t && t->numel == 0 && t->ndim == 2 && t->shape[1] == 5);
    /* the data section starts 8-byte aligned, as the reference writer pads it */
    const struct safetensors_tensor *first = safetensors_at(st, 0);
    FILE *f = fopen(path, "rb");
    unsigned char le[8];
    CHECK(fread(le, 1, 8, f) == 8);
    fclose(f);
    uint64_t n = 0;
    for (int k = 7; k >= 0; k--)
        n = n << 8 | le[k];
    CHECK_EQ((8 + n) % 8, 0);
    CHECK_STR(first->name, "fc1.weight");
    /* read-time checks name the tensor and both sides */
    const int64_t wrong[2] = {2, 3};
    CHECK_ERR(safetensors_read(st, "fc1.weight", SAFETENSORS_F32, 2, wrong, w2), ERR_FORMAT,
              "fc1.weight has shape [3, 2], expected [2, 3]");
    CHECK_ERR(safetensors_read(st, "fc1.bias", SAFETENSORS_F64, 1, bs, b2), ERR_FORMAT, "fc1.bias is F32, expected F64");
    CHECK_ERR(safetensors_read(st, "fc2.bias", SAFETENSORS_F32, 1, bs, b2), ERR_FORMAT, "has no tensor fc2.bias");
    /* every metadata key, in the file's order */
    CHECK_EQ(safetensors_meta_count(st), 2);
    CHECK_STR(safetensors_meta_key(st, 0), "format");
    CHECK_STR(safetensors_meta_key(st, 1), "step");
    CHECK(safetensors_meta_key(st, 2) == NULL);
    safetensors_close(st);
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* F16, BF16 and F64 read as float32 the way torch's .to(torch.float32) converts them; the bits expected
 * were printed by torch 1.13. */
TEST(safetensors_read_f32_converts_as_torch)
{
    const uint16_t f16[4] = {0x3c00, 0x0001, 0x7c01, 0xfc00}, bf16[4] = {0x3f80, 0xc049, 0x7f81, 0x0001};
    const double f64[8] = {1 + 0x1p-24, 1 + 3 * 0x1p-24, 1e39, -1e39, 1e-46, 1e-45, -0.0, 0.1};
    const int64_t i64[1] = {7};
    struct safetensors_entry e[] = {
        {.name = "h", .dtype = SAFETENSORS_F16, .ndim = 1, .shape = {4}, .data = f16},
        {.name = "b", .dtype = SAFETENSORS_BF16, .ndim = 1, .shape = {4}, .data = bf16},
        {.name = "d", .dtype = SAFETENSORS_F64, .ndim = 2, .shape = {2, 4}, .data = f64},
        {.name = "i", .dtype = SAFETENSORS_I64, .ndim = 1, .shape = {1}, .data = i64},
    };
    const char *path = check_tmp_path("conv.safetensors");
    CHECK_OK(safetensors_write(path, e, 4, NULL, 0, 0));
    safetensors_t *st;
    CHECK_OK(safetensors_open(path, &st));
    static const struct {
        const char *name;
        int ndim;
        int64_t shape[2];
        uint32_t want[8];
    } c[] = {
        {"h", 1, {4}, {0x3f800000u, 0x33800000u, 0x7fc02000u, 0xff800000u}},
        {"b", 1, {4}, {0x3f800000u, 0xc0490000u, 0x7f810000u, 0x00010000u}},
        /* ties to even (down, then up), past the range to infinity, below half the smallest subnormal to
         * zero, a subnormal, the sign of zero, and an ordinary rounding */
        {"d", 2, {2, 4},
         {0x3f800000u, 0x3f800002u, 0x7f800000u, 0xff800000u, 0x00000000u, 0x00000001u, 0x80000000u, 0x3dcccccdu}},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        float got[8];
        CHECK_OK(safetensors_read_f32(st, c[k].name, c[k].ndim, c[k].shape, got));
        for (size_t i = 0; i < (c[k].ndim == 2 ? 8u : 4u); i++)
            CHECK_MSG(f32_bits(got[i]) == c[k].want[i], "%s[%zu]: 0x%08x, torch gives 0x%08x", c[k].name, i,
                      f32_bits(got[i]), c[k].want[i]);
    }
    float x[8];
    const int64_t four[1] = {4}, one[1] = {1};
    CHECK_ERR(safetensors_read_f32(st, "h", 1, one, x), ERR_FORMAT, "h has shape [4], expected [1]");
    CHECK_ERR(safetensors_read_f32(st, "i", 1, one, x), ERR_FORMAT, "i is I64, expected a float type");
    CHECK_ERR(safetensors_read_f32(st, "none", 1, four, x), ERR_FORMAT, "has no tensor none");
    safetensors_close(st);
}

/* Every float16 and bfloat16 bit pattern and 2^18 float64 values (ties and edges of float32's range among
 * them) against torch's own .to(torch.float32), which tests/crosscheck/init_torch.sh has torch write into
 * $DDP_INIT_DIR/conversions.safetensors (too large to keep in the repository). */
TEST(safetensors_read_f32_equals_torch)
{
    const char *dir = getenv("DDP_INIT_DIR");
    if (!dir)
        CHECK_SKIP("needs $DDP_INIT_DIR from tests/crosscheck/init_torch.sh (PyTorch)");
    char path[1024], key[32];
    snprintf(path, sizeof path, "%s/conversions.safetensors", dir);
    safetensors_t *st;
    CHECK_OK(safetensors_open(path, &st));
    const char *kinds[] = {"f16", "bf16", "f64"};
    for (int k = 0; k < 3; k++) {
        snprintf(key, sizeof key, "%s.as_f32", kinds[k]);
        const struct safetensors_tensor *src = safetensors_find(st, kinds[k]), *want = safetensors_find(st, key);
        CHECK(src && want && want->dtype == SAFETENSORS_F32 && want->numel == src->numel && src->ndim == 1);
        uint32_t *got = malloc(want->bytes);
        CHECK(got);
        CHECK_OK(safetensors_read_f32(st, kinds[k], 1, src->shape, (float *)got));
        for (size_t i = 0; i < src->numel; i++) {
            uint32_t w;
            memcpy(&w, (const unsigned char *)want->data + 4 * i, 4);
            CHECK_MSG(got[i] == w, "%s element %zu: 0x%08x, torch gives 0x%08x", kinds[k], i, got[i], w);
        }
        free(got);
    }
    safetensors_close(st);
}

TEST(safetensors_write_refuses_bad_entries_and_leaves_nothing)
{
    float x = 1;
    struct safetensors_entry dup[] = {{.name = "a", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {1}, .data = &x},
                                      {.name = "a", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {1}, .data = &x}};
    CHECK_ERR(safetensors_write(check_tmp_path("dup.safetensors"), dup, 2, NULL, 0, 0), ERR_ARG, "two tensors are called a");
    struct safetensors_entry meta_name = {.name = "__metadata__", .dtype = SAFETENSORS_F32, .ndim = 0, .data = &x};
    CHECK_ERR(safetensors_write(check_tmp_path("m.safetensors"), &meta_name, 1, NULL, 0, 0), ERR_ARG, "__metadata__");
    struct safetensors_entry neg = {.name = "n", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {-4}, .data = &x};
    CHECK_ERR(safetensors_write(check_tmp_path("n.safetensors"), &neg, 1, NULL, 0, 0), ERR_ARG, "negative or overflowing");
    CHECK(access(check_tmp_path("dup.safetensors"), F_OK) != 0);
    /* an unwritable directory: the error names the file, and nothing is created */
    struct safetensors_entry one = {.name = "a", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {1}, .data = &x};
    CHECK_ERR(safetensors_write("/nonexistent-dir/x.safetensors", &one, 1, NULL, 0, 0), ERR_IO,
              "/nonexistent-dir/x.safetensors");
}

static void expect_refused(const char *path, const char *needle)
{
    safetensors_t *st = NULL;
    int rc = safetensors_open(path, &st);
    CHECK_MSG(rc == ERR_FORMAT, "%s: expected ERR_FORMAT, got %s (%s)", path, err_name(rc), err_msg());
    CHECK_CONTAINS(err_msg(), needle);
    CHECK_CONTAINS(err_msg(), path);
    CHECK(st == NULL);
}

TEST(safetensors_refuses_hostile_headers)
{
    float d[4] = {0};
    uint64_t huge = UINT64_MAX - 3, big = 200u << 20, past = 1000;
    expect_refused(raw_file("short", "", NULL, NULL, 0), "does not start with"); /* only the 8-byte size, of 0 */
    FILE *f = fopen(check_tmp_path("tiny"), "wb");
    fwrite("abc", 1, 3, f);
    fclose(f);
    expect_refused(check_tmp_path("tiny"), "3 bytes, too short");
    expect_refused(raw_file("huge", "{}", &huge, NULL, 0), "header size is 18446744073709551612 bytes, but only 2");
    expect_refused(raw_file("past", "{}", &past, NULL, 0), "but only 2 bytes follow");
    char *pad = malloc((200u << 20) + 1);
    memset(pad, ' ', 200u << 20);
    pad[0] = '{';
    pad[(200u << 20) - 1] = '}';
    pad[200u << 20] = '\0';
    expect_refused(raw_file("big", pad, &big, NULL, 0), "more than the format's 100 MiB limit");
    free(pad);
    expect_refused(raw_file("notjson", "[1,2]", NULL, NULL, 0), "does not start with '{'");
    expect_refused(raw_file("badjson", "{\"a\": {\"dtype\": }", NULL, NULL, 0), "not valid JSON");
    expect_refused(raw_file("dupkey", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                            NULL, d, 4),
                   "not valid JSON");
    expect_refused(raw_file("metanum", "{\"__metadata__\":{\"step\":3}}", NULL, NULL, 0), "\"step\" is not a string");
    expect_refused(raw_file("entry", "{\"a\": 5}", NULL, NULL, 0), "entry a is not an object");
    expect_refused(raw_file("field", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", NULL,
                            d, 4),
                   "a has an unknown field \"x\"");
    expect_refused(raw_file("dtype", "{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}", NULL, d, 16),
                   "a has dtype \"F128\"");
    expect_refused(raw_file("negdim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", NULL, d, 4),
                   "dimension 0 of its shape is not a non-negative integer");
    expect_refused(raw_file("overflow",
                            "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}",
                            NULL, d, 8),
                   "byte size overflows");
    expect_refused(raw_file("offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", NULL, d, 4),
                   "0 <= begin <= end");
    expect_refused(raw_file("outside", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", NULL, d, 8),
                   "reach past the 8 bytes of data");
    expect_refused(raw_file("size", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", NULL, d, 16),
                   "F32 [3] is 12 bytes, but data_offsets [0, 16] hold 16");
    expect_refused(raw_file("overlap",
                            "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                            "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                            NULL, d, 12),
                   "tensors a and b overlap");
    expect_refused(raw_file("gap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", NULL, d, 8),
                   "bytes 0 to 4 of the data belong to no tensor");
    expect_refused(raw_file("trailing", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", NULL, d, 12),
                   "8 bytes after the last tensor belong to no tensor");
    safetensors_t *st;
    CHECK_ERR(safetensors_open(check_tmp_path("does-not-exist"), &st), ERR_IO, "cannot open");
    CHECK_ERR(safetensors_open(check_tmpdir(), &st), ERR_IO, "not a regular file");
}

TEST(safetensors_truncated_file_is_refused)
{
    float w[256];
    for (int i = 0; i < 256; i++)
        w[i] = (float)i;
    struct safetensors_entry e = {.name = "w", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {256}, .data = w};
    const char *path = check_tmp_path("trunc.safetensors");
    CHECK_OK(safetensors_write(path, &e, 1, NULL, 0, 0));
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    CHECK(truncate(path, sb.st_size - 100) == 0);
    expect_refused(path, "reach past");
}
