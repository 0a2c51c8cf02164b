/* cache_dir: where the project keeps files it can rebuild (chapter 1's JSONL
 * offset indexes and decompressed IDX copies) when they cannot live beside
 * their data, because the data's directory is read-only (/usr/share, a
 * shared corpus).
 *
 * Where it sits: under the datasets (dataset_jsonl.c, dataset_idx.c). One rule,
 * in one place, so every cached file of a user is in one directory:
 *
 *     $DDP_CACHE_DIR                     when set and not empty (as given)
 *     $XDG_CACHE_HOME/ddp-datapath       when that is an absolute path
 *     $HOME/.cache/ddp-datapath          when HOME is set and not empty
 *     /tmp/ddp-datapath-<uid>            otherwise
 *
 * The second and third are the XDG Base Directory Specification's (0.8: a
 * relative $XDG_CACHE_HOME is invalid and ignored; the default is
 * $HOME/.cache). The last keeps a process with no home (a daemon, `env -i`)
 * working; as /tmp is shared, it is used only if it is a real directory (not a
 * symbolic link) that belongs to the user.
 */
#ifndef DDP_CACHE_DIR_H
#define DDP_CACHE_DIR_H

#include <stddef.h>

/* Writes the cache directory (the rule above) into buf[0..len), without
 * creating it. 0; ERR_ARG when it does not fit; ERR_IO when the /tmp fallback
 * exists but is not the user's own directory. Never fails otherwise. */
int cache_dir_path(char *buf, size_t len);

/* cache_dir_path(), then creates the directory and its parents (mkdir -p;
 * the /tmp fallback with mode 0700, readable by its owner only). 0, ERR_ARG
 * or ERR_IO (naming the directory that could not be created). */
int cache_dir_create(char *buf, size_t len);

#endif
