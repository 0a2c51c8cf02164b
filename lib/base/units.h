/* units: sizes as people read them, in every message and table of the project.
 *
 * Where it sits: under whatever tells a person how many bytes something is:
 * chapter 4's tables (a copy of 64 KiB), the simulated device's messages (an
 * H2D of 196 KiB), a disk too small for a corpus (needs 16.0 EiB). One
 * formatter, so the same size reads the same everywhere.
 *
 * Binary units (1 KiB = 1024 bytes), the ones copy sizes, pages and buffers
 * come in, and the ones cli_parse_bytes() reads ("64K" is 64 KiB): a size
 * that is a whole number of its unit is written whole ("64 KiB"), any other
 * with one decimal ("140.7 KiB").
 */
#ifndef DDP_UNITS_H
#define DDP_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Writes `bytes` into buf ("512 B", "64 KiB", "9.6 MiB", up to EiB; 16
 * bytes hold any of them); returns buf. */
char *units_format_bytes(uint64_t bytes, char *buf, size_t cap);

#endif
