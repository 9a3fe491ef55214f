/*
 * modelfp: the sha256 of a whole model file, remembered in a small cache
 * so that a large model is read once, not at every run or resume.
 *
 * The cache is one text file of lines
 *   SHA256 DEV INO SIZE MTIME CTIME PATH
 * (MTIME and CTIME as SECONDS.NANOSECONDS, PATH as given, the rest of the
 * line). An entry is used only when the file's device, inode, size, mtime,
 * ctime and path are all the same as when it was hashed, so a file
 * rewritten in place, replaced, copied or touched is hashed again. Where
 * it lives: $SWEEP_CACHE_DIR/model-sha256, else
 * $XDG_CACHE_HOME/sweep/model-sha256, else ~/.cache/sweep/model-sha256;
 * without any of them nothing is cached. The ssh executor keeps the same
 * file, written by a shell script, in its remote work folder
 * (WORKDIR/.sweep-cache/model-sha256, exec/ssh.c). A cache that cannot be
 * read or written only costs a new hash.
 */
#ifndef RUNNER_MODELFP_H
#define RUNNER_MODELFP_H

#include <stdbool.h>
#include <sys/stat.h>

#include "err.h"

/* Most entries kept; the oldest go first. */
#define MODELFP_CACHE_MAX 256

/* The cache file's path (heap), or NULL when no folder for it is known. */
char *modelfp_cache_path(void);

/*
 * sha256 (hex, 65 bytes) of the whole file open on fd at path, whose
 * fstat is st: from the cache when an entry matches, else read from fd
 * (from its start) and remembered. *cached says which. Returns 0, or -1
 * with err (RN_ERR_ENV) when the file cannot be read.
 */
int modelfp_sha256(const char *path, int fd, const struct stat *st, char hex[65], bool *cached,
                   struct err *err);

#endif
