/* dataset_jsonl: the files a JSONL dataset keeps beside its data (chapter 1).
 *
 * Where it sits: behind dataset.h. dataset_open("corpus.jsonl") lands in
 * dataset_jsonl.c (read its top comment first), which builds these files once
 * and maps them on every later open. This header is their on-disk format, for
 * the tests and fuzz targets that write damaged ones on purpose:
 *
 *     <data>.offsets          the offset index: where each record starts
 *     <data>.lengths.<field>  a length table: the integer field <field> of each
 *                             record (a field whose name is not 1 to 48 of
 *                             [A-Za-z0-9_.-] is named by its FNV-1a instead:
 *                             <data>.lengths.x<16 hex digits>)
 *
 * One index, and one length table per field asked for: opening the data with
 * and without a length field, or with another one, builds nothing twice.
 * When the data's directory is not writable, they go to the cache directory
 * (cache_dir.h) as <dir>/<16 hex digits of the data's real path>-<name>.
 *
 * Both files are a header (struct jsonl_header, 72 bytes), then 8-byte words
 * in native byte order:
 *     offsets   count + 1 words: word i is where record i starts; the last,
 *               the sentinel, is the data's size
 *     lengths   count words: word i is record i's length field
 * A word holds its value in the low 48 bits and a 16-bit tag of (i, value) in
 * the high 16 (jsonl_word()). An edited word, or words shifted to other
 * positions (one deleted, one duplicated), no longer carry the tag of where
 * they are and are refused at read time instead of being served. 48 bits:
 * data files up to 256 TiB, lengths up to 2^48 - 1.
 */
#ifndef DDP_DATASET_JSONL_H
#define DDP_DATASET_JSONL_H

#include <stdint.h>

#define JSONL_MAGIC "DDPJSONL"
#define JSONL_VERSION 2u       /* 1: one file, lengths beside the offsets, no tags */
#define JSONL_VALUE_BITS 48
#define JSONL_VALUE_MASK ((1ull << JSONL_VALUE_BITS) - 1)

enum jsonl_file_kind { JSONL_FILE_OFFSETS = 0, JSONL_FILE_LENGTHS = 1 }; /* the header's flags */

struct jsonl_header {
    char magic[8];
    uint32_t version;
    uint32_t flags;           /* enum jsonl_file_kind */
    uint64_t data_size;       /* the data file this describes: its size, */
    uint64_t data_mtime_ns;   /* its mtime, */
    uint64_t data_checksum;   /* FNV-1a of its first and last 4 KiB */
    uint64_t field_hash;      /* lengths: FNV-1a of the field's name; offsets: 0 */
    uint64_t count;           /* records */
    uint64_t max_value;       /* offsets: bytes of the longest record; lengths: the largest length */
    uint64_t header_checksum; /* FNV-1a of every byte above */
};

/* Word i of a file, holding `value` (< 2^48). Two multiplies: the tags of an
 * index of 200 M records cost the build a few milliseconds. The golden-ratio
 * and xxHash64 prime constants spread i and value over the top 16 bits, so a
 * value moved to another position, or another value at this one, matches the
 * tag with probability about 2^-16. */
static inline uint64_t jsonl_word(uint64_t i, uint64_t value)
{
    uint64_t tag = (((i + 1) * 0x9e3779b97f4a7c15ull) ^ (value * 0xc2b2ae3d27d4eb4full)) >> JSONL_VALUE_BITS;
    return value | tag << JSONL_VALUE_BITS;
}

#endif
